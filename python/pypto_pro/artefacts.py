"""The artefact tree on the command line (docs/jit.md#artefacts):

    python -m pypto_pro ls [ROOT]        every kernel directory and its instances
    python -m pypto_pro clean [ROOT]     remove them (only what pypto_pro wrote)
    python -m pypto_pro show DIR         one instance: its signature, files and kernel.cpp's head

ROOT defaults to where this process would put kernels ($ASCEND_WORK_PATH/PYPTO_PRO/build, else ./build).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time

from pypto_pro import _C

# <name>__<arch>[__shape_<h12>][__d<dev>[_r<rank>]][__sanitizer][__profile]
_TOP = re.compile(r"^(?P<name>.+?)__(?P<arch>a\d)(?P<rest>(__shape_[0-9a-f]{12})?(__d\d+(_r\d+)?)?(__sanitizer)?"
                  r"(__profile)?)$")
_INSTANCE = re.compile(r"^tk_(none|[0-9a-f]+)$")


def root() -> str:
    return _C.artefact_root()


def _size(path) -> int:
    total = 0
    for base, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(base, f))
            except OSError:
                pass
    return total


def kernels(where=None) -> list:
    """[(kernel directory, name, arch, flags, [instance directories])] under `where`."""
    where = where or root()
    out = []
    if not os.path.isdir(where):
        return out
    for top in sorted(os.listdir(where)):
        m = _TOP.match(top)
        path = os.path.join(where, top)
        if not m or not os.path.isdir(path):
            continue
        flags = [f for f in ("sanitizer", "profile") if f"__{f}" in m.group("rest")]
        if "__shape_" in m.group("rest"):
            flags.append("STATIC shapes")
        instances = []
        for base, dirs, _files in os.walk(path):
            for d in sorted(dirs):
                if _INSTANCE.match(d):
                    instances.append(os.path.join(base, d))
        out.append((path, m.group("name"), m.group("arch"), flags, instances))
    return out


def _ls(where) -> int:
    found = kernels(where)
    for path, name, arch, flags, instances in found:
        print(f"{name}  [{arch}{', ' + ', '.join(flags) if flags else ''}]  {len(instances)} instance(s), "
              f"{_size(path) / 1024:.0f} KiB  {path}")
        for inst in instances:
            libs = [f for f in os.listdir(inst) if f.startswith("call_kernel_") and f.endswith(".so")]
            state = "compiled" if libs else ("compile failed" if os.path.exists(os.path.join(inst, "compile.log"))
                                             else "no library")
            print(f"    {os.path.relpath(inst, path)}  {state}")
    print(f"{len(found)} kernel director{'y' if len(found) == 1 else 'ies'} under {os.path.abspath(where or root())}")
    return 0


def _clean(where) -> int:
    found = kernels(where)
    for path, *_ in found:
        shutil.rmtree(path, ignore_errors=True)
    print(f"removed {len(found)} kernel director{'y' if len(found) == 1 else 'ies'} under "
          f"{os.path.abspath(where or root())}")
    return 0


def _show(path) -> int:
    path = os.path.abspath(path)
    if not os.path.isfile(os.path.join(path, "kernel.cpp")):
        print(f"python -m pypto_pro show: '{path}' is not an instance directory (no kernel.cpp); "
              f"'python -m pypto_pro ls' lists them", file=sys.stderr)
        return 2
    top = os.path.basename(os.path.dirname(path))
    dt = None
    if top.startswith("dt_"):
        with open(os.path.join(os.path.dirname(path), "datatype.json")) as f:
            dt = json.load(f)
        top = os.path.basename(os.path.dirname(os.path.dirname(path)))
    m = _TOP.match(top)
    print(f"instance {path}")
    if m:
        print(f"  kernel {m.group('name')}, arch {m.group('arch')}, TilingKey "
              f"{os.path.basename(path)[3:]}{', datatype ' + json.dumps(dt) if dt else ''}"
              f"{', ' + m.group('rest').replace('__', ' ').strip() if m.group('rest') else ''}")
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            print(f"  {name:40s} {os.path.getsize(full):>9} bytes  "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(os.path.getmtime(full)))}")
    with open(os.path.join(path, "kernel.cpp")) as f:
        head = [next(f, "") for _ in range(3)]
    print("  kernel.cpp: " + " ".join(line.strip().lstrip("/ ") for line in head if line.strip()))
    if not any(n.startswith("ir_") for n in os.listdir(path)):
        print("  (PYPTO_PRO_DUMP_IR=1 writes the IR after every pass here)")
    return 0


def main(command, argv) -> int:
    if command == "show":
        if len(argv) != 1:
            print("usage: python -m pypto_pro show INSTANCE_DIR", file=sys.stderr)
            return 2
        return _show(argv[0])
    where = argv[0] if argv else None
    return _ls(where) if command == "ls" else _clean(where)
