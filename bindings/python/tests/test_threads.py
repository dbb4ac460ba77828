"""The GIL is released while kiln works: Python threads run during an eval, and two threads
calling one compiled function run in parallel."""

import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import kiln

# One compiled function, called from 1 and then 2 Python threads, with kiln's own kernel
# threads off (KILN_NUM_THREADS=1) so that any parallelism comes from the Python threads.
SPEEDUP_SCRIPT = textwrap.dedent(
    """
    import threading, time
    import numpy as np
    import kiln

    @kiln.compile
    def work(x):
        for _ in range(6):
            x = kiln.sin(x) * 1.01 + kiln.cos(x) * 0.5
        return x

    x = kiln.array(np.random.default_rng(1).uniform(-1, 1, 1 << 20).astype(np.float32))
    work(x).eval()  # trace and compile outside the timing
    calls = 8

    def run(n):
        for _ in range(n):
            work(x).eval()

    def timed(threads):
        ts = [threading.Thread(target=run, args=(calls // threads,)) for _ in range(threads)]
        t0 = time.perf_counter()
        for t in ts: t.start()
        for t in ts: t.join()
        return time.perf_counter() - t0

    best = 0.0
    for _ in range(5):
        one, two = timed(1), timed(2)
        best = max(best, one / two)
        if best > 1.3:
            break
    print(f"{best:.2f} {one:.3f} {two:.3f}")
    """
)


def test_two_threads_calling_one_compiled_function_run_in_parallel():
    if (os.cpu_count() or 1) < 2:
        return
    env = dict(os.environ, KILN_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", SPEEDUP_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    speedup, one, two = (float(v) for v in out.stdout.split())
    message = f"2 threads vs 1: {speedup:.2f}x ({one:.3f} s vs {two:.3f} s for 8 calls)"
    print(message)
    load = os.getloadavg()[0]
    if speedup <= 1.3 and load > os.cpu_count() - 0.5:
        pytest.skip(f"{message}, not conclusive: load average {load:.1f} on {os.cpu_count()} cores")
    assert speedup > 1.3, f"2 threads ran only {speedup:.2f}x faster than 1 (8 calls: {one:.3f} s vs {two:.3f} s)"


def test_python_threads_run_while_kiln_evaluates():
    x = kiln.array(np.random.default_rng(2).uniform(-1, 1, 1 << 21).astype(np.float32))
    y = x
    for _ in range(30):
        y = kiln.sin(y) + 0.5
    ticks = [0]
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks[0] += 1

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.01)
    before = ticks[0]
    t0 = time.perf_counter()
    kiln.eval(y)  # would hold the counting thread off for its whole length with the GIL held
    seconds = time.perf_counter() - t0
    during = ticks[0] - before
    done.set()
    t.join()
    assert seconds > 0.02
    assert during > 1000, f"the counting thread advanced {during} times in {seconds:.3f} s of eval"
