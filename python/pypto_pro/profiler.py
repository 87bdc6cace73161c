"""Where the time would go on the NPU: the performance model's profiler (docs/profiler.md).

    with pypto_pro.profiler.profile() as prof:
        kernel[stream, 8](x, y, out)
    print(prof.key_averages().table())
    prof.export_chrome_trace("trace.json")

Inside profile() every launch runs the kernel's profiling instance (compiled once per signature,
next to the plain one): the same code, whose cores also record each op and synchronisation event.
When a launch has run, the model schedules its ops on the arch's pipes by the arch's cost model,
ordered only where the program orders them, and places its blocks on the arch's cores in waves.
Results are the plain kernel's; only the time is modelled. Outside profile() nothing is recorded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pypto_pro import _C

PIPES = ("MTE2", "MTE1", "M", "FIX", "V", "MTE3", "S")
_LINE_SHIFT = 20  # an op's line is file << 20 | line (the file indexes source_files)


@dataclass
class LaunchProfile:
    """One modelled launch. Times in cycles of the arch's clock; `us` in microseconds."""

    kernel: str
    arch: str
    block_dim: int
    physical_slots: int   # blocks the arch runs at once (its cores of the kernel's kind)
    waves: int
    cycles: int
    clock_ghz: float
    busy: dict            # pipe -> cycles busy, summed over the cores that have it
    pipe_cores: dict      # pipe -> cores (over all blocks) whose kind has the pipe
    gm_bytes: int
    flops: float
    truncated: bool
    peak_flops_per_cycle: float
    gm_bytes_per_cycle: float
    source_files: list
    names: list
    ops: list = field(repr=False)     # (block, core, physical core, pipe, start, end, line, name, units, class)
    flows: list = field(repr=False)   # (block, from core, to core, from pipe, to pipe, set at, taken at, set line,
                                      #  wait line, event id)
    stalls: list = field(repr=False)  # (block, core, pipe, from, until, line, reason)
    shape: str = "vector"

    @property
    def us(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    def busy_percent(self, pipe: str) -> float:
        """Of the launch's length, how busy the pipe was on the cores that have it (0..100)."""
        cores = self.pipe_cores.get(pipe, 0)
        return 100.0 * self.busy.get(pipe, 0) / (cores * self.cycles) if cores and self.cycles else 0.0

    def where(self, line: int) -> str:
        """'file.py:12' for an op's encoded line."""
        index, number = line >> _LINE_SHIFT, line & ((1 << _LINE_SHIFT) - 1)
        name = self.source_files[index] if 0 <= index < len(self.source_files) else "?"
        return f"{name.rsplit('/', 1)[-1]}:{number}"


class KernelAverages(list):
    """Per kernel: launches and their averages (what key_averages() returns; a list of dicts)."""

    def table(self, sort_by: str = "cycles") -> str:
        columns = ["kernel", "launches", "cycles", "us"] + [f"{p} %" for p in PIPES] + \
                  ["GM MB", "GFLOP", "GM BW % peak", "cube % peak"]
        rows = [[r["kernel"], str(r["launches"]), f"{r['cycles']:.0f}", f"{r['us']:.2f}"] +
                [f"{r['busy'][p]:.1f}" if p in r["busy"] else "-" for p in PIPES] +
                [f"{r['gm_bytes'] / 1e6:.3f}", f"{r['flops'] / 1e9:.3f}", f"{r['gm_percent']:.1f}",
                 f"{r['cube_percent']:.1f}"]
                for r in sorted(self, key=lambda r: -r[sort_by])]
        widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c) for i, c in enumerate(columns)]
        line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        rule = "-" * (sum(widths) + 2 * (len(widths) - 1))
        return "\n".join([rule, line(columns), rule] + [line(r) for r in rows] + [rule])

    def __str__(self):
        return self.table()


class profile:
    """Records the launches made inside it (of every stream) and models them. Re-entering an open
    profile, or opening two at once, is a RuntimeError."""

    _open = False

    def __init__(self):
        self.launches: list[LaunchProfile] = []

    def __enter__(self):
        if profile._open:
            raise RuntimeError("pypto_pro.profiler.profile() is already open; profiles do not nest")
        _C.synchronize()
        _C._take_profiles()  # launches recorded before this profile are not its
        profile._open = True
        _C._set_profiling(True)
        return self

    def __exit__(self, *exc):
        _C._set_profiling(False)
        profile._open = False
        try:
            _C.synchronize()
        finally:
            self.launches.extend(LaunchProfile(**d) for d in _C._take_profiles())
        return False

    def key_averages(self) -> KernelAverages:
        by_kernel: dict[str, list[LaunchProfile]] = {}
        for launch in self.launches:
            by_kernel.setdefault(launch.kernel, []).append(launch)
        out = KernelAverages()
        for kernel, launches in by_kernel.items():
            n = len(launches)
            cycles = sum(l.cycles for l in launches)
            busy = {}
            for p in PIPES:
                cores = sum(l.pipe_cores.get(p, 0) * l.cycles for l in launches)
                if cores:
                    busy[p] = 100.0 * sum(l.busy.get(p, 0) for l in launches) / cores
            gm = sum(l.gm_bytes for l in launches)
            flops = sum(l.flops for l in launches)
            peak_gm = sum(l.gm_bytes_per_cycle * l.cycles for l in launches)
            peak_flops = sum(l.peak_flops_per_cycle * l.cycles for l in launches)
            out.append({"kernel": kernel, "launches": n, "cycles": cycles / n,
                        "us": sum(l.us for l in launches) / n, "busy": busy, "gm_bytes": gm / n, "flops": flops / n,
                        "gm_percent": 100.0 * gm / peak_gm if peak_gm else 0.0,
                        "cube_percent": 100.0 * flops / peak_flops if peak_flops else 0.0})
        return out

    def export_chrome_trace(self, path: str) -> None:
        """A Chrome / Perfetto trace (chrome://tracing, ui.perfetto.dev): a process per launch, a track
        per core and pipe, each op an event with its source line, stalls with what they wait for,
        and flow arrows for the cross-core flags. Times in microseconds of the modelled NPU."""
        events = []
        for pid, launch in enumerate(self.launches):
            us = 1.0 / (launch.clock_ghz * 1e3)
            events.append({"ph": "M", "name": "process_name", "pid": pid,
                           "args": {"name": f"{launch.kernel} [{launch.block_dim} blocks, {launch.arch}]"}})
            tids = {}

            def tid(block, core, pipe):
                key = (block, core, pipe)
                if key not in tids:
                    tids[key] = len(tids)
                    events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[key],
                                   "args": {"name": f"block {block} {_core_name(launch, core)} {pipe}"}})
                    events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tids[key],
                                   "args": {"sort_index": tids[key]}})
                return tids[key]

            for block, core, physical, pipe, start, end, line, name, units, cls in launch.ops:
                events.append({"ph": "X", "pid": pid, "tid": tid(block, core, pipe),
                               "name": launch.names[name] if name >= 0 else cls, "cat": cls,
                               "ts": start * us, "dur": (end - start) * us,
                               "args": {"line": launch.where(line), "units": units, "core": physical}})
            for block, core, pipe, start, until, line, reason in launch.stalls:
                events.append({"ph": "X", "pid": pid, "tid": tid(block, core, pipe), "name": "stall", "cat": "stall",
                               "ts": start * us, "dur": (until - start) * us,
                               "args": {"line": launch.where(line), "reason": reason}})
            for i, (block, src, dst, src_pipe, dst_pipe, set_at, taken_at, set_line, wait_line, event) in \
                    enumerate(launch.flows):
                flow = {"cat": "cross-core", "name": f"event {event}", "id": pid * 1_000_000 + i, "pid": pid}
                events.append(dict(flow, ph="s", tid=tid(block, src, src_pipe), ts=set_at * us,
                                   args={"line": launch.where(set_line)}))
                events.append(dict(flow, ph="f", bp="e", tid=tid(block, dst, dst_pipe), ts=taken_at * us,
                                   args={"line": launch.where(wait_line)}))
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ns"}, f)


def _core_name(launch: LaunchProfile, core: int) -> str:
    if launch.shape == "mixed":
        return ("AIC", "AIV 0", "AIV 1")[core]
    return "AIC" if launch.shape == "cube" else "AIV"
