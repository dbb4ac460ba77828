"""Sums Nsight Compute's gpu__time_duration per kernel name: ncu_kernels.py CSV [N].
Then one decode step (the repeating tail of the launches) and its first N kernels in order."""
import collections
import csv
import re
import sys

rows, header = [], None
for r in csv.reader(open(sys.argv[1], errors="replace")):
    if "Kernel Name" in r and "Metric Value" in r:
        header = r
    elif header and len(r) == len(header):
        d = dict(zip(header, r))
        if d.get("Metric Name") == "gpu__time_duration.sum":
            # Generated kernels share one name: the launch shape tells them apart.
            name = f'{d["Kernel Name"]} grid {d["Grid Size"].replace(" ", "")} block {d["Block Size"].replace(" ", "")}'
            rows.append((name, float(d["Metric Value"].replace(",", "")) / 1000.0))


def short(name):
    return re.sub(r"\(.*?\) grid", " grid", name)[:90]  # without a mangled argument list


print(f"kernels {len(rows)}, total {sum(t for _, t in rows):.1f} us")
total, count = collections.Counter(), collections.Counter()
for name, t in rows:
    total[short(name)] += t
    count[short(name)] += 1
print(f"{'kernel':90} {'n':>6} {'total us':>10} {'avg us':>8}")
for name, t in total.most_common(30):
    print(f"{name:90} {count[name]:6d} {t:10.1f} {t / count[name]:8.2f}")
# A decode step replays the same kernels: the shortest period at the end of the list is one step.
names = [short(n) for n, _ in rows]
for p in range(8, len(rows) // 2 + 1):
    if names[-p:] == names[-2 * p:-p]:
        step = rows[-p:]
        print(f"one decode step: {p} kernels, {sum(t for _, t in step):.1f} us of kernel time")
        for name, t in step[: int(sys.argv[2]) if len(sys.argv) > 2 else 40]:
            print(f"  {t:7.2f}  {name}")
        break
