"""PyTorch's NCCL all-reduce, the peer of kiln's all_sum in bench/run_distributed.sh.

One process per GPU (torch.multiprocessing.spawn, the process group met through a file), float32,
sizes doubling from --min-mib to --max-mib, the same iteration counts as bench/distributed.cpp:
two warm-up calls, then `iters` in-place dist.all_reduce calls queued back to back and one
synchronize; time = wall time / iters on rank 0. Writes one JSON object a line, kiln's fields.
--graph: bfloat16 at 8 KiB to 1 MiB, 64 all_reduces captured in one CUDA graph, 20 replays each
synchronized (kiln's `bench_distributed all_sum_graph`).
Keep NCCL_NVLS_ENABLE=0 in the environment (run_distributed.sh sets it).
"""

import argparse
import json
import os
import sys
import tempfile
import time


def iterations(nbytes):
    return max(10, min(200, (4 << 30) // nbytes))


def graph_sizes(torch, dist, rank, world):
    """bfloat16 all_reduces of 8 KiB to 1 MiB, 64 captured in one CUDA graph (kiln's all_sum_graph)."""
    k, calls = 64, 20
    lines = []
    kib = 8
    while kib <= 1024:
        nbytes = kib << 10
        x = torch.full((nbytes // 2,), 0.5, dtype=torch.bfloat16, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                dist.all_reduce(x)  # warm-up outside the graph, as PyTorch asks before capturing NCCL
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k):
                dist.all_reduce(x)
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            g.replay()
            torch.cuda.synchronize()
        t = (time.perf_counter() - start) / (calls * k)
        algbw = nbytes / t / 1e9
        lines.append({"bench": "all_sum_graph", "engine": "torch", "ranks": world, "dtype": "bfloat16",
                      "bytes": nbytes, "per_call": k, "time_us": round(t * 1e6, 3), "algbw_gbs": round(algbw, 3),
                      "busbw_gbs": round(algbw * 2 * (world - 1) / world, 3),
                      "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))})
        del g, x
        kib *= 2
    return lines


def worker(rank, world, init_file, min_mib, max_mib, out_path, graph):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    if graph:
        lines = graph_sizes(torch, dist, rank, world)
        min_mib = max_mib + 1  # the eager sizes are skipped
    else:
        lines = []
    mib = min_mib
    while mib <= max_mib:
        nbytes = mib << 20
        x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
        iters = iterations(nbytes)
        for _ in range(2):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        t = (time.perf_counter() - start) / iters
        algbw = nbytes / t / 1e9
        lines.append({"bench": "all_sum", "engine": "torch", "ranks": world, "dtype": "float32", "bytes": nbytes,
                      "iters": iters, "time_us": round(t * 1e6, 3), "algbw_gbs": round(algbw, 3),
                      "busbw_gbs": round(algbw * 2 * (world - 1) / world, 3),
                      "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version()))})
        del x
        mib *= 2
    if rank == 0:
        with open(out_path, "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min-mib", type=int, default=1)
    p.add_argument("--max-mib", type=int, default=1024)
    p.add_argument("--out", required=True)
    p.add_argument("--graph", action="store_true", help="bfloat16 8 KiB-1 MiB, 64 all_reduces captured in a CUDA graph")
    a = p.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("nccl_allreduce.py: set NCCL_NVLS_ENABLE=0 (NVLink multicast stays off)")
    import torch
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    if world < 2:
        sys.exit(f"nccl_allreduce.py: needs 2 GPUs or more, {world} visible")
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(world, os.path.join(d, "init"), a.min_mib, a.max_mib, a.out, a.graph), nprocs=world, join=True)
    with open(a.out) as f:
        sys.stdout.write(f.read())


if __name__ == "__main__":
    main()
