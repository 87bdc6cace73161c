"""The persistent kernel cache (docs/jit.md#persistent-cache): compiled kernel libraries kept across
processes when PYPTO_PRO_CACHE_DIR is set or a kernel says pl.jit(cache=True), and the device code
every kernel compile uses precompiled (pch/, docs/jit.md#precompiled-device-headers-and-routines).

    python -m pypto_pro cache [dir | ls | clear | warm]
"""

from __future__ import annotations

import os
import sys
import time

from pypto_pro import _C


def directory() -> str:
    """Where the cache is: PYPTO_PRO_CACHE_DIR, else $XDG_CACHE_HOME/pypto_pro, else ~/.cache/pypto_pro."""
    return _C.default_cache_dir()


def entries() -> list:
    """(file name, bytes, modification time) of each cached library, oldest first."""
    root = directory()
    if not os.path.isdir(root):
        return []
    out = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name.startswith("call_kernel_") and name.endswith(".so") and os.path.isfile(path):
            st = os.stat(path)
            out.append((name, st.st_size, st.st_mtime))
    return sorted(out, key=lambda e: e[2])


def precompiled() -> list:
    """(directory, bytes, modification time) of each set of precompiled device code in pch/: the
    headers (.gch) and the routines library of one compiler, flags and header version
    (docs/jit.md#precompiled-device-headers-and-routines), oldest first."""
    root = os.path.join(directory(), "pch")
    out = []
    for name in (os.listdir(root) if os.path.isdir(root) else []):
        total, newest = 0, 0.0
        for dirpath, _, names in os.walk(os.path.join(root, name)):
            for file in names:
                try:
                    st = os.stat(os.path.join(dirpath, file))
                except FileNotFoundError:  # another process cleared it
                    continue
                total += st.st_size
                newest = max(newest, st.st_mtime)
        if total:
            out.append((os.path.join(root, name), total, newest))
    return sorted(out, key=lambda e: e[2])


def clear() -> int:
    """Removes every cached library and all precompiled device code (and leftovers of interrupted
    writes); returns how many files."""
    root = directory()
    removed = 0
    if not os.path.isdir(root):
        return 0
    doomed = [os.path.join(root, name) for name in os.listdir(root)
              if (name.startswith("call_kernel_") or name.startswith(".tmp")) and name.endswith(".so")]
    pch = os.path.join(root, "pch")
    for dirpath, _, names in os.walk(pch):
        doomed += [os.path.join(dirpath, name) for name in names]
    for path in doomed:
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:  # another process cleared it first
            pass
    for dirpath, _, _ in sorted(os.walk(pch), key=lambda w: -len(w[0])):  # deepest first
        try:
            os.rmdir(dirpath)
        except OSError:  # not empty: another process is writing there
            pass
    return removed


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else "ls"
    if command == "dir":
        print(directory())
    elif command == "ls":
        found = entries()
        for name, size, mtime in found:
            print(f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(mtime))}  {size / 1024:8.0f} KiB  {name}")
        print(f"{len(found)} kernel librar{'y' if len(found) == 1 else 'ies'}, "
              f"{sum(e[1] for e in found) / 2**20:.1f} MiB in {directory()}")
        sets = precompiled()
        print(f"{len(sets)} set{'' if len(sets) == 1 else 's'} of precompiled device code, "
              f"{sum(e[1] for e in sets) / 2**20:.1f} MiB in {os.path.join(directory(), 'pch')}")
    elif command == "clear":
        print(f"removed {clear()} file(s) from {directory()}")
    elif command == "warm":
        return warm()
    else:
        print(f"python -m pypto_pro cache: unknown command {command!r}; use dir, ls, clear or warm", file=sys.stderr)
        return 2
    return 0


def warm() -> int:
    """Builds the precompiled device code of the configured compiler and flags now, if missing: the
    first kernel compile on a machine (or after an upgrade) otherwise waits for it, once."""
    start = time.perf_counter()
    try:
        where, built = _C.prepare_device_code()
    except RuntimeError as exc:
        print(f"python -m pypto_pro cache warm: {exc}", file=sys.stderr)
        return 1
    if not where:
        print("no precompiled device code: PYPTO_PRO_PCH=0, or the cache directory cannot be written "
              f"({directory()}); every compile compiles it inline")
        return 0
    took = time.perf_counter() - start
    print(f"{'built' if built else 'already built:'} the precompiled device code in {where}"
          + (f" ({took:.1f} s)" if built else ""))
    return 0
