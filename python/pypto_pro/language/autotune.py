"""pl.autotune: pick a kernel's TilingKey (and block count) by the performance model's cycles
(docs/profiler.md#autotune), never by the host's wall time.

    @pl.autotune(configs=[{"Slots": 1}, {"Slots": 2}], key=["x"])
    @pl.jit(tiling_key=AddKey)
    def add(x: ..., y: ..., z: ...): ...

    add[stream, 8](x, y, z)      # the first launch per key runs every config under the profiler

The first launch for each key value (the shapes of the tensors and the values of the scalars named
in `key`) compiles and runs every config once inside pypto_pro.profiler.profile(), keeps the one
with the fewest modelled cycles, and launches it; later launches with that key use the choice
directly. Candidates run on the launch's own arguments: a kernel that reads what it writes (an
accumulating output) names those tensors in `restore_value`, which are restored before each
candidate and before the real launch.
"""

from __future__ import annotations

import inspect

from pypto_pro.language.jit import JitFunction


class Autotuner:
    """What @pl.autotune makes of a @pl.jit kernel: launched like it (kernel[stream, block_dim](...)),
    choosing the TilingKey itself."""

    def __init__(self, kernel, configs, key, restore_value):
        if not isinstance(kernel, JitFunction):
            raise TypeError(f"pl.autotune decorates a @pl.jit kernel (put @pl.autotune above @pl.jit), got {kernel!r}")
        if not isinstance(configs, (list, tuple)) or not configs:
            raise ValueError(f"pl.autotune: configs must be a non-empty list of dicts, got {configs!r}")
        fields = set(kernel.tiling_key_fields())
        for i, config in enumerate(configs):
            if not isinstance(config, dict) or not config:
                raise ValueError(f"pl.autotune: configs[{i}] must be a non-empty dict of TilingKey fields (and "
                                 f"optionally 'block_dim'), got {config!r}")
            for name, value in config.items():
                if name == "block_dim":
                    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                        raise ValueError(f"pl.autotune: configs[{i}]['block_dim'] must be an int >= 1, got {value!r}")
                elif name not in fields:
                    known = ", ".join(sorted(fields)) or "none: the kernel has no tiling_key="
                    raise ValueError(f"pl.autotune: configs[{i}] names '{name}', which is not a TilingKey field of "
                                     f"kernel '{kernel.kernel_name}' (its fields: {known})")
        params = [p.name for p in kernel.spec.params]
        for name in list(key) + list(restore_value):
            if name not in params:
                raise ValueError(f"pl.autotune: '{name}' is not a parameter of kernel '{kernel.kernel_name}' "
                                 f"({', '.join(params)})")
        self.kernel = kernel
        self.configs = [dict(c) for c in configs]
        self.key = list(key)
        self.restore_value = list(restore_value)
        self.choices = {}   # key value -> (chosen config, [(config, cycles, us), ...] fastest first)
        self.tunings = 0    # key values tuned so far
        self.kernel_name = kernel.kernel_name

    def __getitem__(self, launch):
        items = launch if isinstance(launch, tuple) else (launch,)
        if any(isinstance(item, dict) for item in items):
            raise TypeError(f"autotuned kernel '{self.kernel_name}': the TilingKey is what the tuner chooses; "
                            f"launch it as kernel[stream, block_dim](...)")
        if len(items) == 1:
            items = (None,) + items
        if len(items) != 2:
            raise TypeError(f"autotuned kernel '{self.kernel_name}': launch it as kernel[stream, block_dim](...), "
                            f"got {len(items)} entries in the brackets")
        stream, block_dim = items
        return lambda *args, **kwargs: self._launch(stream, block_dim, args, kwargs)

    def _key_of(self, arguments):
        parts = []
        for name in self.key:
            value = arguments[name]
            shape = getattr(value, "shape", None)
            parts.append((name, tuple(shape) if shape is not None else value))
        return tuple(parts)

    def _launch(self, stream, block_dim, args, kwargs):
        from pypto_pro import profiler, runtime

        arguments = inspect.signature(self.kernel.fn).bind(*args, **kwargs).arguments
        key = self._key_of(arguments)
        saved = {name: arguments[name].clone() if hasattr(arguments[name], "clone") else arguments[name].copy()
                 for name in self.restore_value}

        def restore():
            for name, value in saved.items():
                arguments[name][...] = value

        def launch(config):
            tiling = {k: v for k, v in config.items() if k != "block_dim"}
            blocks = config.get("block_dim", block_dim)
            target = self.kernel[stream, blocks, tiling] if tiling else self.kernel[stream, blocks]
            target(*args, **kwargs)

        if key not in self.choices:
            if profiler.profile._open:
                raise RuntimeError(f"autotuned kernel '{self.kernel_name}': its first launch for {key or 'its key'} "
                                   f"tunes under the profiler, which is open; launch it once before profiling")
            ranking = []
            for config in self.configs:
                restore()
                with profiler.profile() as prof:
                    launch(config)
                modelled = prof.launches[-1]
                ranking.append((config, modelled.cycles, modelled.us))
            ranking.sort(key=lambda r: r[1])
            self.choices[key] = (ranking[0][0], ranking)
            self.tunings += 1
            runtime.synchronize()
            restore()
        launch(self.choices[key][0])

    def ranking(self) -> str:
        """Every tuned key with its configs, fastest first (modelled cycles and microseconds)."""
        lines = [f"autotune of kernel '{self.kernel_name}' (by modelled cycles, fastest first):"]
        for key, (chosen, ranking) in self.choices.items():
            lines.append(f"  key {dict(key) if key else '(none)'}:")
            for config, cycles, us in ranking:
                mark = "  <- chosen" if config is chosen else ""
                lines.append(f"    {config}: {cycles} cycles, {us:.2f} us{mark}")
        return "\n".join(lines)


def autotune(configs, key=(), restore_value=()):
    """@pl.autotune(configs=[{field: value, ...}, ...], key=[param, ...], restore_value=[param, ...])
    above @pl.jit(tiling_key=...): see the module's docstring."""
    for what, names in (("key", key), ("restore_value", restore_value)):
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"pl.autotune: {what} must be a list of parameter names, got {names!r}")
    return lambda kernel: Autotuner(kernel, configs, key, restore_value)
