"""A kernel on several processes with torch.distributed (gloo): each rank runs the softmax example's
kernel on its shard of the rows on its own simulated device (artefacts in <name>__a5__d0_r<rank>), and
an all_reduce gathers the shards; rank 0 checks the whole result against torch.

Run: PYTHONPATH=python /usr/bin/python3 examples/distributed.py [ranks]   (default 2)
"""

import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import pypto_pro

sys.path.insert(0, str(Path(__file__).resolve().parent))
from softmax import softmax  # noqa: E402  (the softmax example's kernel)

ROWS, COLS = 512, 300


def rank_main(rank, world, port, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        x = torch.randn(ROWS, COLS) * 4  # every rank builds the same input, and takes its rows
        rows = slice(rank * ROWS // world, (rank + 1) * ROWS // world)
        shard = softmax(x[rows].contiguous(), block_dim=8)
        pypto_pro.runtime.synchronize()  # launches are asynchronous: the shard is written by now
        full = torch.zeros(ROWS, COLS)
        full[rows] = shard
        dist.all_reduce(full)  # the shards are disjoint: their sum is the whole result
        if rank == 0:
            err = (full - torch.softmax(x, dim=-1)).abs().max().item()
            results.put(err)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run(world=2):
    """Runs `world` ranks; returns rank 0's max |error| against torch."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    mp.start_processes(rank_main, args=(world, port, results), nprocs=world, join=True, start_method="spawn")
    return results.get(timeout=60)


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    err = run(world)
    print(f"softmax {ROWS}x{COLS} on {world} ranks (gloo): max |err| vs torch = {err:.2e}")
    assert err < 1e-5


if __name__ == "__main__":
    main()
