#!/usr/bin/env python3
"""The sparse A/B: one server against S, hash against range sharding, on
embedding rows with Zipf-popular ids (recommendation models' workload).

For each S in --servers and each sharding, shardps-bench --mode=sparse
(spawned servers on this machine) pulls and pushes --ids_per_call ids a
call, drawn with Zipf exponent --zipf from --id_space ids (id 0 the
hottest), for --seconds each, --repeats times; each server's own counters
(TableStats rows_pulled, rows_pushed) give its load. It writes, under
--out (experiments/results/sparse_ab):

  results.jsonl   every bench line
  table.md        median rows/s and max/mean load per (S, sharding)
  load.png        each server's load at the largest S, hash vs range
  throughput.png  pushed and pulled rows/s against S

On one machine the servers share its cores, so rows/s against S shows
what the servers' work costs, not a cluster's scaling; the load's
balance (max/mean) does not depend on where the servers run.

  python3 experiments/sparse_ab.py [--servers=1,2,4] [--dim=16]
      [--ids_per_call=100000] [--id_space=10000000] [--zipf=1.1]
      [--seconds=3] [--repeats=3] [--out=DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench(args, servers, sharding):
    cmd = [abkit.binary("shardps-bench"), "--mode=sparse", "--json",
           f"--spawn_servers={servers}", f"--row_sharding={sharding}",
           f"--dim={args.dim}", f"--ids_per_call={args.ids_per_call}",
           f"--id_space={args.id_space}", f"--zipf={args.zipf}",
           f"--seconds={args.seconds}", f"--workers={args.workers}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def write_table(path, points, args):
    with open(path, "w") as f:
        f.write(f"shardps-bench --mode=sparse, dim {args.dim}, "
                f"{args.ids_per_call} ids a call, Zipf {args.zipf} over "
                f"{args.id_space} ids, {args.workers} client thread(s); "
                f"medians of {args.repeats} runs of {args.seconds} s\n\n")
        f.write("| S | sharding | push rows/s | pull rows/s | "
                "per-server load (rows/s) | busiest server MB/s | "
                "max/mean |\n")
        f.write("|---|---|---|---|---|---|---|\n")
        for (servers, sharding), runs in sorted(points.items()):
            loads = [statistics.median(r["server_rows_per_s"][i] for r in runs)
                     for i in range(servers)]
            busiest = statistics.median(max(r["server_bytes_per_s"])
                                        for r in runs)
            f.write(f"| {servers} | {sharding} | "
                    f"{median_of(runs, 'push_rows_per_s'):,.0f} | "
                    f"{median_of(runs, 'pull_rows_per_s'):,.0f} | "
                    f"{' / '.join(f'{v:,.0f}' for v in loads)} | "
                    f"{busiest / 1e6:,.1f} | "
                    f"{median_of(runs, 'load_max_over_mean'):.2f} |\n")


def plot(out, points):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    largest = max(s for s, _ in points)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    width = 0.4
    for k, sharding in enumerate(["hash", "range"]):
        runs = points.get((largest, sharding))
        if not runs:
            continue
        loads = [statistics.median(r["server_rows_per_s"][i] for r in runs)
                 for i in range(largest)]
        ax.bar([i + (k - 0.5) * width for i in range(largest)], loads, width,
               label=f"{sharding} (max/mean "
                     f"{median_of(runs, 'load_max_over_mean'):.2f})")
    ax.set_xlabel("server")
    ax.set_ylabel("rows pulled + pushed per second")
    ax.set_title(f"Per-server load, S = {largest}, Zipf ids")
    ax.set_xticks(range(largest))
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "load.png"), dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for sharding in ["hash", "range"]:
        for key, style in [("push_rows_per_s", "-o"),
                           ("pull_rows_per_s", "--s")]:
            pts = sorted((s, median_of(runs, key))
                         for (s, sh), runs in points.items() if sh == sharding)
            if pts:
                ax.plot(*zip(*pts), style,
                        label=f"{sharding}: {key.split('_')[0]}")
    ax.set_xlabel("servers S")
    ax.set_ylabel("distinct rows per second")
    ax.set_title("Sparse rows against servers (one machine)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "throughput.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default="1,2,4")
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--ids_per_call", type=int, default=100000)
    ap.add_argument("--id_space", type=int, default=10000000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(
        ROOT, "experiments", "results", "sparse_ab"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    points = {}
    with open(os.path.join(args.out, "results.jsonl"), "w") as log:
        # Alternating, so that a noisy minute hits every point alike.
        for _ in range(args.repeats):
            for servers in [int(s) for s in args.servers.split(",")]:
                for sharding in ["hash", "range"]:
                    r = bench(args, servers, sharding)
                    log.write(json.dumps(r) + "\n")
                    points.setdefault((servers, sharding), []).append(r)
                    print(f"S={servers} {sharding}: push "
                          f"{r['push_rows_per_s']:,.0f} rows/s, load "
                          f"max/mean {r['load_max_over_mean']:.2f}",
                          flush=True)
    write_table(os.path.join(args.out, "table.md"), points, args)
    plot(args.out, points)
    with open(os.path.join(args.out, "table.md")) as f:
        print(f.read())


if __name__ == "__main__":
    main()
