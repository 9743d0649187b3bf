#!/usr/bin/python3
"""shardps.torch against PyTorch's RPC parameter server, side by side in one
run: the same MLP (about 1M and 10M parameters), the same step (forward
and backward of a batch, then the gradients out and the parameters back,
SGD applied as each arrives), 2 trainer processes, one compute thread each
(OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=1), on loopback. shardps: 2 servers, each trainer a shardps.torch
DistributedOptimizer (one PushPull per step); the peer:
experiments/peers/torch_rpc_trainers.py (one parameter server process).
Alternating rounds; steps per second of both trainers together, medians
and the median of each round's ratio.

  PYTHONPATH=build/python /usr/bin/python3 experiments/torch_step.py \\
      [--rounds 3] [--seconds 10] [--out DIR]

Writes OUT/torch_step.md and .csv.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import abkit  # noqa: E402

# (name, MLP widths): about 1M and 10M parameters.
MODELS = (("1M", "784,1024,200,10"), ("10M", "784,8192,400,10"))
PEER = os.path.join(HERE, "peers", "torch_rpc_trainers.py")


def trainer(args):
    """One shardps trainer (a process of its own): prints its step times
    as a JSON line."""
    import torch
    import torch.nn.functional as F
    import shardps
    import shardps.torch
    sys.path.insert(0, os.path.join(HERE, "peers"))
    from torch_rpc_ps import timed_steps
    from torch_rpc_trainers import mlp
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = mlp(args.layers)
    widths = [int(w) for w in args.layers.split(",")]
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, widths[0], generator=generator)
    y = torch.randint(0, widths[-1], (args.batch,), generator=generator)
    client = shardps.Client(args.servers, job="step", worker=args.rank)
    client.wait_ready()
    opt = shardps.torch.DistributedOptimizer(
        model.named_parameters(), client, table="mlp",
        optimizer={"name": "sgd", "learning_rate": 0.01}, world=2,
        rank=args.rank)
    shardps.torch.broadcast_parameters(opt)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    times = timed_steps(step, args.seconds, warmup=3)
    client.close()
    print(json.dumps({"params": opt.num_params, "times": times}), flush=True)


def shardps_run(layers, batch, seconds, num_servers):
    """(steps/s of both trainers, params) against fresh servers."""
    with abkit.local_servers(num_servers, "step") as addrs:
        trainers = [subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--trainer",
             f"--rank={r}", f"--servers={','.join(addrs)}",
             f"--layers={layers}", f"--batch={batch}",
             f"--seconds={seconds}"], stdout=subprocess.PIPE, text=True)
            for r in range(2)]
        results = []
        for t in trainers:
            out, _ = t.communicate(timeout=seconds * 10 + 300)
            if t.returncode != 0:
                raise RuntimeError(f"a shardps trainer failed ({layers})")
            results.append(json.loads(out.strip().splitlines()[-1]))
    rate = sum(len(r["times"]) / sum(r["times"]) for r in results)
    return rate, results[0]["params"]


def torch_run(layers, batch, seconds):
    out = subprocess.run(
        [sys.executable, PEER, f"--layers={layers}", "--workers=2",
         f"--batch={batch}", f"--seconds={seconds}"], check=True,
        capture_output=True, text=True, timeout=seconds * 10 + 300).stdout
    return json.loads(out.strip().splitlines()[-1])["steps_per_s"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--servers_count", type=int, default=2,
                        help="shardps servers (the peer has one)")
    parser.add_argument("--models", default="1M,10M",
                        help="which of 1M, 10M to run")
    parser.add_argument("--out", default=os.path.join(abkit.ROOT, "experiments",
                                                      "results", "python"))
    parser.add_argument("--trainer", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--servers", default="", help=argparse.SUPPRESS)
    parser.add_argument("--layers", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trainer:
        args.servers = args.servers.split(",")
        trainer(args)
        return 0
    # One thread of compute per process on both sides: torch's
    # set_num_threads(1) leaves Debian's OpenBLAS threads running, and they
    # spin after each product on the cores the clients' and servers'
    # threads need (a 10M PushPull took 49 ms after a step's compute, 29 ms
    # alone).
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    rows = []
    models = [(n, l) for n, l in MODELS if n in args.models.split(",")]
    for r in range(args.rounds):
        for name, layers in models:
            ours, params = shardps_run(layers, args.batch, args.seconds,
                                       args.servers_count)
            theirs = torch_run(layers, args.batch, args.seconds)
            rows.append([r, name, params, ours, theirs])
            print(f"round {r} {name} ({params} params): shardps.torch "
                  f"{ours:.2f} steps/s, torch RPC {theirs:.2f} "
                  f"({ours / theirs:.2f}x)", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "torch_step.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["round", "model", "params", "shardps_steps_per_s",
                    "torch_rpc_steps_per_s"])
        w.writerows(rows)
    lines = ["| model | params | shardps.torch steps/s | torch RPC steps/s | "
             "ratio (median of rounds) |", "|---|---|---|---|---|"]
    for name, _ in models:
        mine = [row for row in rows if row[1] == name]
        lines.append(
            f"| {name} | {mine[0][2]:,} | "
            f"{statistics.median(row[3] for row in mine):.2f} | "
            f"{statistics.median(row[4] for row in mine):.2f} | "
            f"{statistics.median(row[3] / row[4] for row in mine):.2f}x |")
    with open(os.path.join(args.out, "torch_step.md"), "w") as f:
        f.write(f"2 trainers, {args.servers_count} shardps servers, batch "
                f"{args.batch}, {args.seconds:g} s per run, "
                f"{args.rounds} alternating rounds, one machine "
                f"({os.cpu_count()} cores):\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
