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
        notes = ["* events past the recording budget were dropped: the model covers a prefix of the launch"] \
            if any(r["kernel"].endswith("*") for r in self) else []
        return "\n".join([rule, line(columns), rule] + [line(r) for r in rows] + [rule] + notes)

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
            out.append({"kernel": kernel + ("*" if any(l.truncated for l in launches) else ""), "launches": n,
                        "cycles": cycles / n,
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
        self.export_html(str(path).rsplit(".json", 1)[0] + ".html")

    def export_html(self, path: str) -> None:
        """A self-contained HTML page (inline SVG, no script, no viewer needed) with each launch's
        timeline: its first blocks' cores and pipes, the ops as bars, stalls hatched, cross-core flags
        as arrows. export_chrome_trace writes one next to the trace."""
        with open(path, "w") as f:
            f.write(_html(self.launches))


_COLOURS = {"MTE2": "#4e79a7", "MTE1": "#76b7b2", "M": "#e15759", "FIX": "#f28e2b", "V": "#59a14f",
            "MTE3": "#b07aa1", "S": "#9c755f"}


def _escape(text) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def timeline_svg(launch: LaunchProfile, max_blocks: int = 4, width: int = 1400) -> str:
    """An SVG timeline of one launch: a row per core and pipe of its first `max_blocks` blocks, each op
    a bar (hover: name, line, cycles), stalls hatched, cross-core flags as arrows."""
    rows = {}
    for op in launch.ops:
        if op[0] < max_blocks:
            rows.setdefault((op[0], op[1], op[3]), []).append(op)
    order = sorted(rows, key=lambda r: (r[0], r[1], PIPES.index(r[2]) if r[2] in PIPES else 99))
    index = {r: i for i, r in enumerate(order)}
    end = max((op[5] for ops in rows.values() for op in ops), default=1) or 1
    label_w, row_h, top = 150, 18, 24
    scale = (width - label_w - 10) / end
    x = lambda t: label_w + t * scale
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + row_h * len(order) + 30}" '
           f'font-family="monospace" font-size="11">',
           '<defs><pattern id="stall" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="3" height="6" fill="#cccccc"/></pattern>'
           '<marker id="arrow" markerWidth="8" markerHeight="8" refX="6" refY="3" orient="auto">'
           '<path d="M0,0 L6,3 L0,6 z" fill="#333"/></marker></defs>']
    for i, (block, core, pipe) in enumerate(order):
        y = top + i * row_h
        out.append(f'<text x="4" y="{y + 13}">block {block} {_core_name(launch, core)} {pipe}</text>')
        out.append(f'<line x1="{label_w}" y1="{y + row_h}" x2="{width - 10}" y2="{y + row_h}" stroke="#eeeeee"/>')
    for block, core, pipe, start, until, line, reason in launch.stalls:
        if (block, core, pipe) in index:
            y = top + index[(block, core, pipe)] * row_h
            out.append(f'<rect x="{x(start):.1f}" y="{y + 3}" width="{max((until - start) * scale, 0.5):.1f}" '
                       f'height="{row_h - 6}" fill="url(#stall)"><title>{_escape(reason)} '
                       f'({_escape(launch.where(line))}, {until - start} cycles)</title></rect>')
    for (block, core, pipe), ops in rows.items():
        y = top + index[(block, core, pipe)] * row_h
        for _, _, _, _, start, stop, line, name, units, cls in ops:
            label = launch.names[name] if name >= 0 else cls
            out.append(f'<rect x="{x(start):.1f}" y="{y + 2}" width="{max((stop - start) * scale, 0.5):.1f}" '
                       f'height="{row_h - 4}" fill="{_COLOURS.get(pipe, "#888888")}"><title>{_escape(label)} at '
                       f'{_escape(launch.where(line))}: {stop - start} cycles ({units} {_escape(cls)} units)'
                       f'</title></rect>')
    for block, src, dst, src_pipe, dst_pipe, set_at, taken_at, set_line, wait_line, event in launch.flows:
        a, b = index.get((block, src, src_pipe)), index.get((block, dst, dst_pipe))
        if a is None or b is None:
            continue
        out.append(f'<line x1="{x(set_at):.1f}" y1="{top + a * row_h + row_h / 2}" x2="{x(taken_at):.1f}" '
                   f'y2="{top + b * row_h + row_h / 2}" stroke="#333" stroke-width="0.8" marker-end="url(#arrow)">'
                   f'<title>cross-core event {event}: set at {_escape(launch.where(set_line))}, taken at '
                   f'{_escape(launch.where(wait_line))}</title></line>')
    y = top + row_h * len(order) + 20
    us = end / (launch.clock_ghz * 1e3)
    out.append(f'<text x="{label_w}" y="{y}">0</text><text x="{width - 10}" y="{y}" text-anchor="end">'
               f'{end} cycles = {us:.2f} us</text>')
    out.append("</svg>")
    return "\n".join(out)


def _html(launches) -> str:
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>pypto_pro profile</title>",
             "<style>body{font-family:sans-serif;margin:16px}h2{font-size:15px;margin:18px 0 4px}"
             "pre{font-size:12px;background:#f6f6f6;padding:6px}.key span{display:inline-block;padding:1px 6px;"
             "margin-right:4px;color:white;font-size:11px}</style></head><body>",
             "<h1>pypto_pro profile: modelled NPU timelines</h1>",
             "<p>Modelled by pypto_pro's performance model (see the project's docs/profiler.md); hover a bar for "
             "its op, source line and cycles. Hatched: a pipe held by a wait. Arrows: cross-core flags.</p>",
             "<p class='key'>" + "".join(f"<span style='background:{c}'>{p}</span>" for p, c in _COLOURS.items()) +
             "</p>"]
    for i, launch in enumerate(launches):
        busy = ", ".join(f"{p} {launch.busy_percent(p):.0f}%" for p in PIPES if p in launch.busy)
        parts.append(f"<h2>{i}: {_escape(launch.kernel)} &mdash; {launch.block_dim} blocks on {launch.arch}, "
                     f"{launch.cycles} cycles ({launch.us:.2f} us), busy {busy}"
                     f"{' (truncated)' if launch.truncated else ''}</h2>")
        parts.append(timeline_svg(launch))
    parts.append("</body></html>")
    return "\n".join(parts)


def _core_name(launch: LaunchProfile, core: int) -> str:
    if launch.shape == "mixed":
        return ("AIC", "AIV 0", "AIV 1")[core]
    return "AIC" if launch.shape == "cube" else "AIV"


def main(argv=None) -> int:
    """python -m pypto_pro profile [-o DIR] script.py [args...]: runs the script as __main__ inside
    profile(), then prints the table and writes DIR/trace.json (Chrome / Perfetto) and DIR/trace.html
    (the timelines, no viewer needed); DIR defaults to ./pypto_profile."""
    import os
    import runpy
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    out_dir = "pypto_profile"
    if argv[:1] in (["-o"], ["--out"]):
        if len(argv) < 2:
            print("pypto_pro profile: -o needs a directory", file=sys.stderr)
            return 2
        out_dir, argv = argv[1], argv[2:]
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m pypto_pro profile [-o DIR] script.py [args...]\n\n" + (main.__doc__ or ""))
        return 0 if argv else 2
    if not os.path.isfile(argv[0]):
        print(f"pypto_pro profile: no script {argv[0]!r}", file=sys.stderr)
        return 2
    sys.argv = argv
    prof = profile()
    try:
        with prof:
            runpy.run_path(argv[0], run_name="__main__")
    finally:
        os.makedirs(out_dir, exist_ok=True)
        trace = os.path.join(out_dir, "trace.json")
        prof.export_chrome_trace(trace)
        print(prof.key_averages().table())
        print(f"pypto_pro profile: {len(prof.launches)} launch(es); trace {trace}, timelines "
              f"{os.path.join(out_dir, 'trace.html')}")
    return 0
