"""Names of the public language that this version does not implement yet, outside the op registry.

The registry's planned ops (pypto_pro._C.ir.planned_ops()) are the planned `pl.<op>` calls. Everything
else the public language exports and this version does not build (the vector-function and SIMT
namespaces, text-IR parsing, pl.function / pl.program, structs, the enums only those use)
is an object carrying a `__pypto_planned__` marker: (public name, what it will do). Such objects exist so
modules written for the public language import; the kernel parser raises UnsupportedFeatureError at the
line where a kernel reads one (docs/language.md#planned).
"""

from __future__ import annotations

import enum

PLANNED_ATTR = "__pypto_planned__"


def planned_message(name: str, doc: str) -> str:
    return (f"{name} is part of the public language but is not implemented yet (planned for a later version: "
            f"{doc}; see docs/language.md#planned)")


def mark(obj, name: str, doc: str):
    """Marks `obj` (a function, a class, an enum) as the planned public name `name`; returns it."""
    setattr(obj, PLANNED_ATTR, (name, doc))
    return obj


def planned_info(value):
    """(public name, what it will do) if `value` is a planned name, an instance or member of a planned
    class or enum, or a function a planned decorator marked; else None."""
    if isinstance(value, enum.Enum):  # before the int test: members of an IntEnum are ints
        info = getattr(type(value), PLANNED_ATTR, None)
        return (f"{info[0]}.{value.name}", info[1]) if isinstance(info, tuple) else None
    if isinstance(value, (bool, int, float, str, type(None))):
        return None
    try:
        info = getattr(value, PLANNED_ATTR, None)
    except Exception:  # an object whose attribute lookup itself fails is no planned name
        return None
    return info if isinstance(info, tuple) and len(info) == 2 else None


class PlannedFunction:
    """A planned function of the public language. Calling it raises NotImplementedError; inside a
    kernel the parser reports it where the kernel reads it."""

    def __init__(self, name: str, doc: str):
        self.__name__ = name.rsplit(".", 1)[-1]
        self.__qualname__ = self.__name__
        self.__doc__ = f"planned: {doc}"
        mark(self, name, doc)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(planned_message(*getattr(self, PLANNED_ATTR)))

    def __repr__(self):
        return f"<planned {getattr(self, PLANNED_ATTR)[0]}>"


class Namespace:
    """A namespace of the public language (pl.Vf, pl.simt): its attributes are set once."""

    def __init__(self, name: str, doc: str, members: dict):
        object.__setattr__(self, "__name__", name)
        object.__setattr__(self, "__doc__", doc)
        for key, value in members.items():
            object.__setattr__(self, key, value)

    def __setattr__(self, key, value):
        raise AttributeError(f"{self.__name__} is read-only")

    def __dir__(self):
        return sorted(k for k in vars(self) if not k.startswith("_"))

    def __repr__(self):
        return f"<namespace {self.__name__}>"


def planned_enum(name: str, members, doc: str, *, use: str) -> type:
    """An IntEnum of the public language whose members are numbered in declaration order, as the
    public language numbers them; `use` says what it is an option of (for the planned message)."""
    cls = enum.IntEnum(name, [(m, i) for i, m in enumerate(members)], module="pypto_pro.language",
                       qualname=name)
    cls.__doc__ = doc
    cls.__repr__ = cls.__str__ = lambda self: f"pl.{name}.{self.name}"
    return mark(cls, f"pl.{name}", use)


# ---- decorators ----

class PlannedIRFunction:
    """What @pl.function makes: the function, recorded. The public language parses it into a standalone
    IR function at decoration; that is not implemented yet, so using the result raises."""

    def __init__(self, fn, func_type, strict_ssa):
        self.fn = fn
        self.func_type = func_type
        self.strict_ssa = strict_ssa
        self.__name__ = getattr(fn, "__name__", repr(fn))
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        mark(self, f"@pl.function '{self.__name__}'", _FUNCTION_DOC)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(planned_message(*getattr(self, PLANNED_ATTR)))

    def __repr__(self):
        return f"<planned @pl.function {self.__name__}>"


class PlannedProgram:
    """What @pl.program makes: the class, recorded (its @pl.function methods would become one IR
    program, which is not implemented yet)."""

    def __init__(self, cls, strict_ssa):
        self.cls = cls
        self.strict_ssa = strict_ssa
        self.__name__ = getattr(cls, "__name__", repr(cls))
        mark(self, f"@pl.program '{self.__name__}'", _PROGRAM_DOC)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(planned_message(*getattr(self, PLANNED_ATTR)))

    def __repr__(self):
        return f"<planned @pl.program {self.__name__}>"


_FUNCTION_DOC = "a standalone IR function parsed from a Python function (pl.function(type=, strict_ssa=))"
_PROGRAM_DOC = "an IR program made of the @pl.function methods of a class"


def function(fn=None, *, type=None, strict_ssa: bool = False):  # noqa: A002 (the public keyword)
    """@pl.function / @pl.function(type=pl.FunctionType.InCore, strict_ssa=False): records the function.
    Calling the result, or using it in a kernel, raises (planned: standalone IR functions)."""
    if not isinstance(strict_ssa, bool):
        raise TypeError(f"pl.function: strict_ssa must be a bool, got {strict_ssa!r}")

    def decorate(f):
        if not callable(f):
            raise TypeError(f"pl.function decorates a Python function, got {f!r}")
        return PlannedIRFunction(f, type, strict_ssa)

    return decorate if fn is None else decorate(fn)


def program(cls=None, *, strict_ssa: bool = False):
    """@pl.program / @pl.program(strict_ssa=False) on a class of @pl.function methods: records it.
    Using the result raises (planned: IR programs)."""
    if not isinstance(strict_ssa, bool):
        raise TypeError(f"pl.program: strict_ssa must be a bool, got {strict_ssa!r}")

    def decorate(c):
        if not isinstance(c, type):
            raise TypeError(f"pl.program decorates a class, got {c!r}")
        return PlannedProgram(c, strict_ssa)

    return decorate if cls is None else decorate(cls)


def inline(fn):
    """@pl.inline: returns the function unchanged. A plain Python function a kernel calls is inlined
    anyway (docs/language.md#control-flow), so the decorator has nothing to add here."""
    if not callable(fn):
        raise TypeError(f"pl.inline decorates a Python function, got {fn!r}")
    return fn


for _decorator, _doc in ((function, _FUNCTION_DOC), (program, _PROGRAM_DOC)):
    mark(_decorator, f"pl.{_decorator.__name__}", _doc)


# ---- text IR ----

parse = PlannedFunction("pl.parse", "parse the text form of an IR function")
loads = PlannedFunction("pl.loads", "read an IR function from its text form")
parse_program = PlannedFunction("pl.parse_program", "parse the text form of an IR program")
loads_program = PlannedFunction("pl.loads_program", "read an IR program from its text form")
