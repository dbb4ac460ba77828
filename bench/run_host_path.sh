#!/usr/bin/env bash
# kiln's own share of a GPU call's host time, measured without a GPU: gpu_peers' host_call
# section (a compiled 32-op function on 1k float32: the call and its launch, with eval,
# and with async_eval) against bench/null_cuda.cpp, a driver that runs nothing, so what
# remains is kiln's tracing, caches, allocation and launch packing. With a baseline gpu_peers binary the two alternate, five rounds each.
# Writes bench/results/host_path_<date>.json (KILN_BENCH_OUT=<path> writes there instead).
#   bench/run_host_path.sh [build dir, default build/] [baseline gpu_peers binary]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
baseline="${2:-}"
current="$build/bench/gpu_peers"
driver_dir="$build/bench/null_cuda"
if [[ ! -x "$current" || ! -f "$driver_dir/libcuda.so.1" ]]; then
  echo "run_host_path: build gpu_peers and null_cuda first (ninja -C $build gpu_peers null_cuda)" >&2
  exit 1
fi
out="${KILN_BENCH_OUT:-$root/bench/results/host_path_$(date +%F).json}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

for round in 1 2 3 4 5; do
  for name in current baseline; do
    bin="$current"
    if [[ $name == baseline ]]; then
      [[ -n "$baseline" ]] || continue
      bin="$baseline"
    fi
    OPENBLAS_NUM_THREADS=1 LD_LIBRARY_PATH="$driver_dir" "$bin" --sections host --out "$tmp/$name-$round.json" >/dev/null
  done
done

python3 - "$tmp" "$out" <<'EOF'
import glob, json, os, platform, statistics, sys
tmp, out = sys.argv[1], sys.argv[2]
rounds = []
for path in sorted(glob.glob(os.path.join(tmp, "*.json"))):
    name, rnd = os.path.basename(path)[:-5].rsplit("-", 1)
    rec = next(r for r in json.load(open(path))["records"] if r.get("section") == "host_call")
    keys = ("kiln_us", "kiln_new_input_us", "kiln_eval_us", "kiln_async_eval_us", "kiln_async_eval_p90_us", "kiln_async_eval_loop_us",
            "kiln_graph_us", "kiln_threads1_calls_per_s", "kiln_threads2_calls_per_s",
            "kiln_threads1_graph_calls_per_s", "kiln_threads2_graph_calls_per_s")
    rounds.append({"binary": name, "round": int(rnd), **{k: rec[k] for k in keys if k in rec}})
medians = {}
for name in ("current", "baseline"):
    mine = [r for r in rounds if r["binary"] == name]
    if mine:
        medians[name] = {k: statistics.median(r[k] for r in mine) for k in mine[0] if k.startswith("kiln")}
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
result = {"meta": {"driver": "bench/null_cuda.cpp (no kernels run)", "cpu": model, "cpus": os.cpu_count()},
          "median_kiln_us": medians, "rounds": rounds}
if len(medians) == 2:
    result["current_over_baseline"] = {k: medians["current"][k] / medians["baseline"][k] for k in medians["current"]
                                       if k in medians["baseline"]}
json.dump(result, open(out, "w"), indent=1)
print(json.dumps({k: v for k, v in result.items() if k != "rounds"}))
print("wrote", out)
EOF
