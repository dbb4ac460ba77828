"""PyTorch's NCCL all-reduce, the peer of kiln's all_sum in bench/run_distributed.sh.

One process per GPU (torch.multiprocessing.spawn, the process group met through a file), float32,
sizes doubling from --min-mib to --max-mib, the same iteration counts as bench/distributed.cpp:
two warm-up calls, then `iters` in-place dist.all_reduce calls queued back to back and one
synchronize; time = wall time / iters on rank 0. Writes one JSON object a line, kiln's fields.
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


def worker(rank, world, init_file, min_mib, max_mib, out_path):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
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
    a = p.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("nccl_allreduce.py: set NCCL_NVLS_ENABLE=0 (NVLink multicast stays off)")
    import torch
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    if world < 2:
        sys.exit(f"nccl_allreduce.py: needs 2 GPUs or more, {world} visible")
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(world, os.path.join(d, "init"), a.min_mib, a.max_mib, a.out), nprocs=world, join=True)
    with open(a.out) as f:
        sys.stdout.write(f.read())


if __name__ == "__main__":
    main()
