#!/usr/bin/python3
"""What the Python package costs over the C++ client: a push and a pull of
P floats (p50 of SECONDS of back-to-back pushes, then of pulls, as
shardps-bench measures them) from Python through the shardps package,
against shardps-bench --spawn_servers=1 --workers=1, alternating, ROUNDS
rounds in one run; medians and the median of each round's ratio.

  PYTHONPATH=build/python /usr/bin/python3 experiments/python_overhead.py \\
      [--params 10000000] [--rounds 3] [--seconds 5] [--out DIR]

Writes OUT/python_overhead.md and .csv.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402


def python_p50s(params, seconds):
    """(push, pull) p50 ms of the shardps package against a server of its
    own on loopback."""
    import numpy as np
    import shardps
    with abkit.local_servers(1, "overhead") as addrs:
        client = shardps.Client(addrs, job="overhead")
        client.wait_ready()
        client.create_table("bench", params, optimizer={
            "name": "sgd", "learning_rate": 0.01})
        grad = np.full(params, 1e-6, np.float32)
        values = np.empty(params, np.float32)
        # As shardps-bench: a short warm-up of each, then pushes for
        # `seconds`, then pulls for `seconds`.
        calls = (lambda: client.push("bench", 0, params, grad),
                 lambda: client.pull("bench", 0, params, values))
        for call in calls:
            timed(call, min(1.0, seconds / 5))
        p50s = [statistics.median(timed(call, seconds)) for call in calls]
        client.close()
    return tuple(p50s)


def timed(call, seconds):
    """ms of each of `call`'s back-to-back calls for `seconds`."""
    times = []
    stop = time.time() + seconds
    while time.time() < stop:
        t0 = time.perf_counter()
        call()
        times.append(1e3 * (time.perf_counter() - t0))
    return times


def bench_p50s(params, seconds):
    out = subprocess.run(
        [abkit.binary("shardps-bench"), "--spawn_servers=1", "--workers=1",
         f"--params={params}", f"--seconds={seconds}", "--json"],
        check=True, capture_output=True, text=True)
    line = json.loads(out.stdout.strip().splitlines()[-1])
    return line["push_p50_ms"], line["pull_p50_ms"]


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", type=int, default=10000000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--out", default=os.path.join(
        abkit.ROOT, "experiments", "results", "python"))
    args = ap.parse_args()
    try:
        import shardps
    except ImportError as e:
        sys.exit(f"python_overhead: the shardps package is not importable "
                 f"({e}); build it and set PYTHONPATH=build/python")
    print(f"python_overhead: shardps from {os.path.dirname(shardps.__file__)}")
    rows = []
    for rnd in range(args.rounds):
        py = python_p50s(args.params, args.seconds)
        cc = bench_p50s(args.params, args.seconds)
        rows.append([rnd, py[0], py[1], cc[0], cc[1]])
    med = statistics.median
    ratio = med([(r[1] + r[2]) / (r[3] + r[4]) for r in rows])
    lines = [
        f"A push and a pull of {args.params:,} floats, one client and one "
        f"server on loopback: p50 of {args.seconds:g} s of calls, "
        f"{args.rounds} alternating rounds in one run; medians, and the "
        "median of each round's ratio.", "",
        "| client | push ms | pull ms | push + pull ms |",
        "|---|---|---|---|",
        f"| Python (shardps) | {med(r[1] for r in rows):.2f} "
        f"| {med(r[2] for r in rows):.2f} "
        f"| {med(r[1] + r[2] for r in rows):.2f} |",
        f"| C++ (shardps-bench) | {med(r[3] for r in rows):.2f} "
        f"| {med(r[4] for r in rows):.2f} "
        f"| {med(r[3] + r[4] for r in rows):.2f} |", "",
        f"Python / C++: {ratio:.3f}"]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "python_overhead.csv"), "w",
              newline="") as f:
        w = csv.writer(f)
        w.writerow(["round", "python_push_ms", "python_pull_ms",
                    "bench_push_ms", "bench_pull_ms"])
        w.writerows(rows)
    with open(os.path.join(args.out, "python_overhead.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
