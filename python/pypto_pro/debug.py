"""What pl.dump_data saved, read back as numpy (docs/language.md#debug).

Each dump is an .npy file in its kernel instance's `dumps/` directory, listed in `dumps/index.jsonl`
with where it came from. `kernel.dumps()` returns this process's dumps of a kernel object;
`load_dumps(directory)` those of any instance directory.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Dump:
    """One pl.dump_data: `data` is the window (bf16 saved as float32), taken at `offsets` of the tensor
    or tile `name` by core `core` of block `block` at source line `line`; `seq` orders the dumps of a
    process."""

    kernel: str
    name: str
    what: str
    flag: str | None
    dtype: str
    block: int
    core: str
    line: int
    offsets: tuple
    shape: tuple
    pid: int
    seq: int
    path: Path
    data: np.ndarray


def load_dumps(directory, pid: int | None = -1) -> list:
    """The dumps under `directory` (an instance directory or its dumps/), oldest first; `pid`: only
    those of that process (default this one; None: every process)."""
    directory = Path(directory)
    if directory.name != "dumps":
        directory = directory / "dumps"
    index = directory / "index.jsonl"
    if not index.exists():
        return []
    want = os.getpid() if pid == -1 else pid
    dumps = []
    for line in index.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if want is not None and record["pid"] != want:
            continue
        path = directory / record["file"]
        dumps.append(Dump(kernel=record["kernel"], name=record["name"], what=record["what"], flag=record["flag"],
                          dtype=record["dtype"], block=record["block"], core=record["core"], line=record["line"],
                          offsets=tuple(record["offsets"]), shape=tuple(record["shape"]), pid=record["pid"],
                          seq=record["seq"], path=path, data=np.load(path)))
    return sorted(dumps, key=lambda d: (d.pid, d.seq))


__all__ = ["Dump", "load_dumps"]
