"""The benchmark suite: pypto_pro against numpy, torch and numba on the same inputs, in one run.

    make bench                      # everything (a few minutes)
    PYTHONPATH=python /usr/bin/python3 benchmarks/bench.py --sections launch,add

Every section runs in a process of its own (thread pools of torch, numba and the simulated device
slow each other down when they share one) and reports medians; the table shows times, ratios and
the share of the machine limits measured in the same run (STREAM-style add bandwidth, FMA peak).
Timings never decide a test: this is how we know, not what we assert.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def median_time(fn, repeat=7, number=1, warmup=1):
    """Median seconds of one call of fn (number calls per sample)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


# ---- sections: each returns a list of rows {"name", "ours", "peers": {name: value}, "unit", "limit"} ----

def section_machine():
    exe = ROOT / "cmake-build" / "pypto_pro_machine_limits"
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {"machine": json.loads(out)}


def section_launch():
    import numpy as np
    import torch
    import pypto_pro
    from kernels import add_kernel, wide_kernel

    threads = pypto_pro.runtime.device_threads()
    torch.set_num_threads(threads)
    stream = pypto_pro.runtime.Stream()
    rows = []
    for kind in ("numpy", "torch"):
        if kind == "numpy":
            x = np.ones((64, 64), np.float32)
            z = np.zeros_like(x)
        else:
            x = torch.ones(64, 64)
            z = torch.zeros_like(x)
        launch = add_kernel[stream, 1]
        launch(x, x, z)
        stream.synchronize()
        n = 2000

        def enqueue():
            for _ in range(n):
                launch(x, x, z)
            stream.synchronize()

        # Enqueue cost: the host time of n launches minus the time the stream needs to run them
        # is not separable on 2 cores, so report the host-side call time of a burst.
        samples = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(n):
                launch(x, x, z)
            samples.append((time.perf_counter() - start) / n)
            stream.synchronize()
        rows.append({"name": f"cached launch, 3 {kind} tensors (enqueue)", "ours": statistics.median(samples),
                     "unit": "us", "target": 1.0e-6 if kind == "numpy" else 1.5e-6})

        def launch_sync():
            launch(x, x, z)
            stream.synchronize()

        peers = {}
        if kind == "torch":
            peers["torch.add(out=)"] = median_time(lambda: torch.add(x, x, out=z), number=2000)
        else:
            peers["numpy.add(out=)"] = median_time(lambda: np.add(x, x, out=z), number=2000)
            try:
                import numba

                @numba.njit
                def nb_add(a, b, c):
                    c[:] = a + b

                nb_add(x, x, z)
                peers["numba @njit"] = median_time(lambda: nb_add(x, x, z), number=2000)
            except ImportError:
                pass
        rows.append({"name": f"launch + synchronize, 64x64 fp32 add, {kind}",
                     "ours": median_time(launch_sync, number=500), "peers": peers, "unit": "us",
                     "target": 3e-6})

    # Cost per extra tensor argument: 8-tensor kernel vs the 3-tensor one.
    xs = [np.ones((64, 64), np.float32) for _ in range(8)]
    wide = wide_kernel[stream, 1]
    wide(*xs)
    stream.synchronize()
    three = add_kernel[stream, 1]
    t3 = median_time(lambda: [three(xs[0], xs[1], xs[2]) for _ in range(1000)] and stream.synchronize(),
                     repeat=5) / 1000
    t8 = median_time(lambda: [wide(*xs) for _ in range(1000)] and stream.synchronize(), repeat=5) / 1000
    rows.append({"name": "cost per extra tensor argument (numpy)", "ours": (t8 - t3) / 5, "unit": "us",
                 "target": 50e-9})
    return {"rows": rows}


def section_compile():
    import importlib
    import pypto_pro
    import numpy as np

    rows = []
    start = time.perf_counter()
    kernels = importlib.import_module("kernels")
    x = np.ones((128, 128), np.float16)
    kernels.add_fp16_example[None, 1](x, x, np.zeros_like(x))
    pypto_pro.runtime.synchronize()
    first = time.perf_counter() - start
    (stats,) = kernels.add_fp16_example.compile_stats()
    breakdown = ", ".join(f"{k[:-3]} {v:.0f}" for k, v in stats.items() if k.endswith("_ms"))
    rows.append({"name": "first launch of the add example (ms: " + breakdown + ")", "ours": first, "unit": "ms",
                 "target": 0.150})
    return {"rows": rows}


def section_add():
    import numpy as np
    import torch
    import pypto_pro
    from kernels import add_kernel, add_fp16_example

    threads = pypto_pro.runtime.device_threads()
    torch.set_num_threads(threads)
    rows = []
    stream = pypto_pro.runtime.Stream()
    for label, kernel, shape, tdtype in [("add fp32, 16M elements", add_kernel, (4096, 4096), torch.float32),
                                         ("add fp16, 8192x4096", add_fp16_example, (8192, 4096), torch.float16)]:
        x = torch.randn(shape).to(tdtype)
        y = torch.randn(shape).to(tdtype)
        z = torch.empty_like(x)
        launch = kernel[stream, 64]

        def ours():
            launch(x, y, z)
            stream.synchronize()

        ours()
        assert torch.equal(z, x + y)
        bytes_moved = 3 * x.numel() * x.element_size()
        peers = {f"torch.add ({threads} thr)": median_time(lambda: torch.add(x, y, out=z))}
        xn, yn, zn = x.numpy(), y.numpy(), z.numpy()
        peers["numpy.add"] = median_time(lambda: np.add(xn, yn, out=zn))
        rows.append({"name": label, "ours": median_time(ours), "peers": peers, "unit": "ms",
                     "bytes": bytes_moved, "limit": "add_gbps"})
    return {"rows": rows}


def section_sanitizer():
    import torch
    import pypto_pro
    import pypto_pro.language as pl
    from kernels import add_fp16_example

    torch.set_num_threads(pypto_pro.runtime.device_threads())
    stream = pypto_pro.runtime.Stream()
    x = torch.randn(2048, 1024, dtype=torch.float16)
    y = torch.randn_like(x)
    z = torch.empty_like(x)
    checked = pl.jit(add_fp16_example.fn, sanitizer=True, name="bench_add_fp16_sanitized")

    def run(kernel):
        start = time.perf_counter()
        kernel[stream, 64](x, y, z)
        stream.synchronize()
        return time.perf_counter() - start

    run(add_fp16_example)
    run(checked)
    # Interleaved, so a busy neighbour on the machine slows both alike.
    samples = [(run(add_fp16_example), run(checked)) for _ in range(21)]
    plain = statistics.median(p for p, _ in samples)
    sanitized = statistics.median(c for _, c in samples)
    assert torch.equal(z, x + y)
    return {"rows": [{"name": "add fp16 2048x1024 with sanitizer=True, vs the plain launch (budget 20x)",
                      "ours": sanitized, "peers": {"plain launch": plain}, "unit": "ms", "target": 20 * plain}]}


SECTIONS = {
    "machine": section_machine,
    "launch": section_launch,
    "compile": section_compile,
    "add": section_add,
    "sanitizer": section_sanitizer,
}


# ---- driver ----

def run_section(name):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True, env=env,
                          cwd=os.environ.get("PYPTO_PRO_BENCH_DIR", "/tmp"))
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt_time(seconds, unit):
    scale = {"us": 1e6, "ms": 1e3, "s": 1.0}[unit]
    return f"{seconds * scale:.3g} {unit}"


def render(results):
    machine = results.get("machine", {}).get("machine", {})
    threads = str(machine.get("threads", 2))
    lines = ["| benchmark | pypto_pro | peers | vs best peer | of limit / target |", "|---|---|---|---|---|"]
    for name, result in results.items():
        if name == "machine":
            continue
        if "error" in result:
            lines.append(f"| {name} | failed: {result['error']} | | | |")
            continue
        for row in result["rows"]:
            unit = row["unit"]
            ours = row["ours"]
            peers = row.get("peers", {})
            peer_text = "<br>".join(f"{k}: {fmt_time(v, unit)}" for k, v in peers.items())
            ratio = ""
            if peers:
                best = min(peers.values())
                ratio = f"{best / ours:.2f}x faster" if ours <= best else f"{ours / best:.2f}x slower"
            limit = ""
            if row.get("limit") and row.get("bytes"):
                gbps = row["bytes"] / ours / 1e9
                peak = machine.get(row["limit"], {}).get(threads)
                limit = f"{gbps:.1f} GB/s" + (f" = {100 * gbps / peak:.0f}% of {peak:.0f} GB/s" if peak else "")
            elif row.get("flops"):
                gflops = row["flops"] / ours / 1e9
                peak = machine.get("fma_gflops", {}).get(threads)
                limit = f"{gflops:.0f} GFLOP/s" + (f" = {100 * gflops / peak:.0f}% of {peak:.0f}" if peak else "")
            elif row.get("target"):
                limit = f"target {fmt_time(row['target'], unit)}: {'met' if ours <= row['target'] else 'not met'}"
            lines.append(f"| {row['name']} | {fmt_time(ours, unit)} | {peer_text} | {ratio} | {limit} |")
    head = (f"Measured {time.strftime('%Y-%m-%d')} on {platform.processor() or platform.machine()}, "
            f"{threads} threads; machine: add {machine.get('add_gbps')} GB/s, FMA {machine.get('fma_gflops')} "
            f"GFLOP/s (threads: value).")
    return head + "\n\n" + "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--child")
    parser.add_argument("--json", action="store_true", help="print raw results as JSON")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(SECTIONS[args.child]()))
        return
    results = {}
    for name in ["machine"] + [s for s in args.sections.split(",") if s != "machine"]:
        start = time.perf_counter()
        results[name] = run_section(name)
        print(f"  {name}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    print(json.dumps(results, indent=1) if args.json else render(results))


if __name__ == "__main__":
    main()
