#!/usr/bin/python3
"""Real workloads: the convolutional models of model/README.md trained on
Fashion-MNIST through the servers, and their training speed against PyTorch.

  experiments/real_workloads.py accuracy [--epochs 12] [--out DIR]
      The LeNet-class CNN, 2 servers + 2 workers (local processes), once
      with each loader; the final model's test accuracy.
  experiments/real_workloads.py speed [--rounds 3] [--out DIR]
      shardps-worker --bench=model against experiments/peers/torch_model.py,
      the same spec, batch and one thread, alternating; medians and ratio.
  experiments/real_workloads.py step [--rounds 3] [--out DIR]
      One PushPull of 1M and of 10M floats (shardps-bench --spawn_servers=1
      --workers=1), through shared memory and over TCP, against PyTorch's
      RPC parameter-server step of the same size
      (experiments/peers/torch_rpc_ps.py), alternating; medians.
  experiments/real_workloads.py wire [--rounds 3] [--out DIR]
      Push and pull of 1M and of 10M floats over TCP (shardps-bench
      --workers=1 --shared_memory=false against one server) against TCP
      itself, `iperf3 -P 2` on loopback (the two connections the client
      opens), alternating; medians and ratios; left to the scheduler and
      with both sides pinned alike (server and client on CPUs of their
      own, by taskset).
  experiments/real_workloads.py overlap [--rounds 1] [--out DIR]
      --overlap=layer against --overlap=none, alternating, for both models:
      on the emulated cluster (needs root) with links capped so that a
      step's communication takes about as long as its compute (2 servers,
      1 worker), and on loopback (2 servers, 2 workers); beside each, the
      performance model's prediction of the layer-mode rate from the none
      run (experiments/perfmodel.py predict_overlap).

Each writes OUT/<what>.md (a table) and OUT/<what>.csv; the data set is
converted once from Debian's Fashion-MNIST into OUT/data.
"""

import argparse
import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402
import perfmodel  # noqa: E402

LENET = "cnn:c32k5-p2-c64k5-p2-f1024-10"
# The same stack before its classifier, with AlexNet's classifier widths.
LARGE = "cnn:c32k5-p2-c64k5-f4096-f4096-10"
FASHION_SHAPE = "28x28x1"
SCALE_CALIBRATION = os.path.join(abkit.ROOT, "experiments", "results",
                                 "scale", "calibration.txt")


def fashion_mnist(out):
    data = os.path.join(out, "data")
    if not os.path.exists(os.path.join(data, "train", "manifest.txt")):
        subprocess.run([abkit.binary("shardps-data"), "fashion-mnist",
                        f"--out={data}", "--shards=8"], check=True)
    return data


def write(out, name, header, rows, lines):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    text = "\n".join(lines)
    with open(os.path.join(out, f"{name}.md"), "w") as f:
        f.write(text + "\n")
    print(text)


def accuracy(args):
    data = fashion_mnist(args.out)
    rows = []
    for loader in ("parallel", "sequential"):
        print(f"accuracy: {LENET}, {loader} loader ...", flush=True)
        r = abkit.run_point(
            os.path.join(args.out, "runs", f"accuracy-{loader}"), 2, 2, loader,
            data, {},
            [f"--model={LENET}", f"--epochs={args.epochs}",
             f"--batch={args.batch}", "--optimizer=adam",
             "--lr_schedule=cosine", "--progress_every=0"], cluster="local")
        rows.append([loader, r["ok"], r["final_test_accuracy"],
                     r["samples_per_second"], r["train_seconds"]])
    lines = [f"Fashion-MNIST, {LENET}, 2 servers + 2 workers, batch "
             f"{args.batch}, Adam with the cosine schedule, {args.epochs} "
             "epochs; accuracy of the final model on the 10,000 test images.",
             "", "| loader | test accuracy | samples/s | train s |",
             "|---|---|---|---|"]
    for loader, ok, acc, rate, secs in rows:
        lines.append(f"| {loader} | {100 * acc:.2f}% | {rate:.0f} | {secs:.0f} |"
                     if ok else f"| {loader} | failed |  |  |")
    write(args.out, "accuracy",
          ["loader", "ok", "final_test_accuracy", "samples_per_second",
           "train_seconds"], rows, lines)


def bench(cmd, key="samples_per_s"):
    """`key` of the JSON line `cmd` prints last (None: the whole line)."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    if not lines:
        sys.exit(f"{cmd[0]} printed nothing: {out.stderr.strip()}")
    line = json.loads(lines[-1])
    return line if key is None else line[key]


def speed(args):
    peer = os.path.join(abkit.ROOT, "experiments", "peers", "torch_model.py")
    rows, lines = [], [
        f"Training steps on one random batch of {args.batch}, one thread, "
        f"{args.seconds:g} s per measurement, {args.rounds} alternating "
        "rounds in one run; samples/s.", "",
        "| model | shardps (median) | PyTorch (median) | ratio |",
        "|---|---|---|---|"]
    for spec in (LENET, LARGE):
        named = spec.replace("cnn:", f"cnn:{FASHION_SHAPE}-")
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(bench([abkit.binary("shardps-worker"), "--bench=model",
                               f"--model={named}", f"--batch={args.batch}",
                               f"--bench_seconds={args.seconds}", "--json"]))
            theirs.append(bench(["/usr/bin/python3", peer, "--model", named,
                                 "--batch", str(args.batch), "--seconds",
                                 str(args.seconds)]))
        a, b = statistics.median(ours), statistics.median(theirs)
        rows += [[spec, "shardps", x] for x in ours]
        rows += [[spec, "torch", x] for x in theirs]
        lines.append(f"| `{spec}` | {a:.0f} | {b:.0f} | {a / b:.2f} |")
    write(args.out, "speed", ["model", "system", "samples_per_s"], rows, lines)


def step(args):
    peer = os.path.join(abkit.ROOT, "experiments", "peers", "torch_rpc_ps.py")
    rows, lines = [], [
        f"One step of a worker against one server on one host: a gradient "
        f"of P floats in, the parameters back; p50 of {args.seconds:g} s of "
        f"steps, median of {args.rounds} alternating rounds in one run. "
        "shardps's values go through shared memory (its default on one "
        "host, as TensorPipe's under PyTorch's RPC) or over loopback TCP "
        "(`--shared_memory=false`, as between hosts).", "",
        "| P | shardps PushPull ms (shared memory) | (TCP) "
        "| PyTorch RPC step ms | speed-up (shared memory) | (TCP) |",
        "|---|---|---|---|---|---|"]
    for params in (1000000, 10000000):
        shm, tcp, theirs = [], [], []
        for _ in range(args.rounds):
            for out, memory in ((shm, "true"), (tcp, "false")):
                out.append(bench(
                    [abkit.binary("shardps-bench"), "--spawn_servers=1",
                     "--workers=1", f"--params={params}",
                     f"--shared_memory={memory}",
                     f"--seconds={args.seconds}", "--json"],
                    "push_pull_p50_ms"))
            theirs.append(bench(
                ["/usr/bin/python3", peer, "--params", str(params),
                 "--seconds", str(args.seconds)], "step_p50_ms"))
        med = statistics.median
        a, t, b = med(shm), med(tcp), med(theirs)
        rows += [[params, "shardps_shm", x] for x in shm]
        rows += [[params, "shardps_tcp", x] for x in tcp]
        rows += [[params, "torch_rpc", x] for x in theirs]
        lines.append(f"| {params:,} | {a:.2f} | {t:.2f} | {b:.2f} "
                     f"| {b / a:.2f} | {b / t:.2f} |")
    write(args.out, "step", ["params", "system", "step_p50_ms"], rows, lines)


# Pinned runs: the server on CPU 1, the client on CPU 0.
SERVER_CPU, CLIENT_CPU = "1", "0"


def pinned(cpu, on):
    """The command prefix that runs on `cpu` when `on`."""
    return ["taskset", "-c", cpu] if on else []


def iperf3_mbps(seconds, pin=False):
    """MB/s of `iperf3 -P 2` on loopback, against a server of its own; with
    `pin`, the server on SERVER_CPU and the client on CLIENT_CPU."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(pinned(SERVER_CPU, pin) +
                              ["iperf3", "-s", "-p", str(port)],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        # Refused until the server listens, within milliseconds.
        for _ in range(100):
            out = subprocess.run(
                pinned(CLIENT_CPU, pin) +
                ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-P", "2",
                 "-t", str(seconds), "-J"], capture_output=True, text=True)
            try:
                result = json.loads(out.stdout)
            except json.JSONDecodeError:
                result = {}
            if "sum_received" in result.get("end", {}):
                return result["end"]["sum_received"]["bits_per_second"] / 8e6
            time.sleep(0.05)
        sys.exit(f"iperf3 failed: {out.stdout[-300:]} {out.stderr[-300:]}")
    finally:
        server.kill()
        server.wait()


def tcp_bench(params, seconds, pin):
    """shardps-bench's push and pull MB/s over TCP against one server of
    its own; with `pin`, pinned as iperf3_mbps pins."""
    with abkit.local_servers(1, "bench", SERVER_CPU if pin else None) as addrs:
        line = bench(pinned(CLIENT_CPU, pin) +
                     [abkit.binary("shardps-bench"),
                      f"--server_addrs={addrs[0]}", "--workers=1",
                      f"--params={params}", "--shared_memory=false",
                      f"--seconds={seconds}", "--json"], None)
    return line["push_MBps"], line["pull_MBps"]


def wire(args):
    pin = (os.cpu_count() or 1) >= 2
    rows, lines = [], [
        f"One client and one server on loopback: shardps-bench's push and "
        f"pull of P floats over TCP (`--shared_memory=false`; MB/s of "
        f"{args.seconds:g} s of back-to-back calls) against `iperf3 -P 2` "
        f"for as long, {args.rounds} alternating rounds in one run; "
        "medians, and the median of each round's ratio. Left to the "
        "scheduler, then both pinned alike (`taskset`: server on CPU "
        f"{SERVER_CPU}, client on CPU {CLIENT_CPU}). Last two columns: the "
        "same calls through shared memory (the default on one host), "
        "unpinned, against the unpinned TCP figure.", "",
        "| P | TCP MB/s | push MB/s | pull MB/s | push/TCP | pull/TCP "
        "| pinned: TCP MB/s | push/TCP | pull/TCP "
        "| shared memory push/TCP | pull/TCP |",
        "|---|---|---|---|---|---|---|---|---|---|---|"]
    for params in (1000000, 10000000):
        runs = {k: [] for k in ("tcp", "push", "pull", "tcp_pinned",
                                "push_pinned", "pull_pinned", "shm_push",
                                "shm_pull")}
        for _ in range(args.rounds):
            runs["tcp"].append(iperf3_mbps(args.seconds))
            p, q = tcp_bench(params, args.seconds, False)
            runs["push"].append(p)
            runs["pull"].append(q)
            runs["tcp_pinned"].append(
                iperf3_mbps(args.seconds, pin) if pin else float("nan"))
            p, q = (tcp_bench(params, args.seconds, True) if pin
                    else (float("nan"), float("nan")))
            runs["push_pinned"].append(p)
            runs["pull_pinned"].append(q)
            line = bench([abkit.binary("shardps-bench"),
                          "--spawn_servers=1", "--workers=1",
                          f"--params={params}", "--shared_memory=true",
                          f"--seconds={args.seconds}", "--json"], None)
            runs["shm_push"].append(line["push_MBps"])
            runs["shm_pull"].append(line["pull_MBps"])
        for i in range(args.rounds):
            rows.append([params, i] + [runs[k][i] for k in runs])
        med = statistics.median

        def ratio(xs, against="tcp"):
            return med([x / t for x, t in zip(xs, runs[against])])
        lines.append(
            f"| {params:,} | {med(runs['tcp']):.0f} "
            f"| {med(runs['push']):.0f} | {med(runs['pull']):.0f} "
            f"| {ratio(runs['push']):.2f} | {ratio(runs['pull']):.2f} "
            f"| {med(runs['tcp_pinned']):.0f} "
            f"| {ratio(runs['push_pinned'], 'tcp_pinned'):.2f} "
            f"| {ratio(runs['pull_pinned'], 'tcp_pinned'):.2f} "
            f"| {ratio(runs['shm_push']):.2f} "
            f"| {ratio(runs['shm_pull']):.2f} |")
    write(args.out, "wire", ["params", "round", "tcp_MBps", "push_MBps",
                             "pull_MBps", "tcp_pinned_MBps",
                             "push_pinned_MBps", "pull_pinned_MBps",
                             "shm_push_MBps", "shm_pull_MBps"], rows, lines)


# Per model: batch, worker link, server link on the emulated cluster, and
# steps. One worker computes a LeNet batch of 256 in ~0.12 s and moves 4.4 MB
# each way per step; the large model's batch of 1024 takes ~2.5 s against
# 135 MB each way.
OVERLAP_SETTINGS = {
    LENET: (256, "600mbit", "1gbit", 60),
    LARGE: (1024, "1gbit", "2gbit", 12),
}


def layer_profile(spec, batch):
    """shardps-worker --bench=model's JSON for `spec` at `batch`: the step's
    compute and when each layer needs its parameters and has its gradient
    (experiments/perfmodel.py's layer_step_seconds)."""
    named = spec.replace("cnn:", f"cnn:{FASHION_SHAPE}-")
    out = subprocess.run([abkit.binary("shardps-worker"), "--bench=model",
                          f"--model={named}", f"--batch={batch}",
                          "--bench_seconds=3", "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def simulate_layer_mode(none_row, profile, links):
    """shardps-sim's samples/s of the emulated run `none_row` with
    --overlap=layer: the run's compute per step, the model's layer
    profile, the emulated cluster's calibration (experiments/scale.py's,
    from the sweep); 0 without shardps-sim."""
    sim = abkit.binary("shardps-sim")
    if not os.path.exists(sim):
        return 0
    r = none_row
    out = subprocess.run(
        [sim, f"--calibration={SCALE_CALIBRATION}",
         f"--workers={r['workers']}", f"--servers={r['servers']}",
         f"--compute_ms={r['compute_ms']}", f"--batch={r['batch']}",
         f"--steps={r['steps']}", "--shared_cores=2", "--overlap=layer",
         f"--layers={perfmodel.sim_layers(profile)}"] +
        [f"--{k}_link={v}" for k, v in links.items()],
        check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_second"]


def overlap(args):
    data = fashion_mnist(args.out)
    rows = []
    settings = [("emulated", 1), ("local", 2)]
    for spec, (batch, worker_link, server_link, steps) in \
            OVERLAP_SETTINGS.items():
        profile = layer_profile(spec, batch)
        for cluster, workers in settings:
            if cluster == "emulated":
                abkit.ensure_root()
            links = {"worker": worker_link, "server": server_link,
                     "storage": "1gbit"}
            for rnd in range(args.rounds):
                runs = {}
                for mode in ("none", "layer"):
                    name = (f"overlap-{'lenet' if spec == LENET else 'large'}"
                            f"-{cluster}-{mode}-{rnd}")
                    print(f"overlap: {spec} {cluster} {mode} ...", flush=True)
                    runs[mode] = abkit.run_point(
                        os.path.join(args.out, "runs", name), 2, workers,
                        "parallel", data, links,
                        [f"--model={spec}", f"--batch={batch}",
                         f"--max_steps={steps}", "--epochs=1000",
                         "--optimizer=adam", "--progress_every=0"],
                        cluster=cluster, overlap=mode)
                # The model's layer-mode rate, from this round's none run,
                # and on the emulated cluster the simulator's.
                model = sim = 0
                if runs["none"]["ok"]:
                    model = perfmodel.predict_overlap(runs["none"], profile)
                    if cluster == "emulated":
                        sim = simulate_layer_mode(runs["none"], profile, links)
                for mode, r in runs.items():
                    rows.append([spec, cluster, workers, mode, rnd, r["ok"],
                                 r["samples_per_second"], model, sim])
    write_overlap(args, rows)


def write_overlap(args, rows):
    lines = [f"Samples/s with --overlap=layer against --overlap=none, 2 "
             f"servers, {args.rounds} alternating round(s) in one run; "
             "emulated: 1 worker, links capped (worker/server link "
             "below); loopback: 2 workers on this machine's 2 cores. "
             "model: experiments/perfmodel.py's layer-mode rate from the "
             "round's none run and the model's layer profile; sim: "
             "shardps-sim's from the same and the emulated cluster's "
             "calibration (experiments/scale.py); errors against layer.",
             "",
             "| model | cluster | batch | links | none | layer | ratio "
             "| model | error | sim | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for spec, (batch, worker_link, server_link, _) in OVERLAP_SETTINGS.items():
        for cluster in ("emulated", "local"):
            mine = [x for x in rows if x[0] == spec and x[1] == cluster
                    and x[5]]
            rate = {m: statistics.median([x[6] for x in mine if x[3] == m]
                                         or [0]) for m in ("none", "layer")}
            predicted = [statistics.median(
                [x[k] for x in mine if x[3] == "layer"] or [0])
                for k in (7, 8)]
            ratio = (f"{rate['layer'] / rate['none']:.2f}" if rate["none"]
                     else "failed")
            figures = " | ".join(
                f"{p:.0f} | {100 * (p / rate['layer'] - 1):+.0f}%"
                if rate["layer"] and p else "- | -" for p in predicted)
            where = (f"{worker_link}/{server_link}" if cluster == "emulated"
                     else "loopback")
            lines.append(f"| `{spec}` | {cluster} | {batch} | {where} "
                         f"| {rate['none']:.0f} | {rate['layer']:.0f} "
                         f"| {ratio} | {figures} |")
    write(args.out, "overlap",
          ["model", "cluster", "workers", "overlap", "round", "ok",
           "samples_per_second", "model_layer_samples_per_second",
           "sim_layer_samples_per_second"], rows,
          lines)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["accuracy", "speed", "step", "wire",
                                       "overlap"])
    ap.add_argument("--out", default=os.path.join(
        abkit.ROOT, "experiments", "results", "real_workloads"))
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=None,
                    help="speed, step, wire: 3 by default; overlap: 1")
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()
    if args.rounds is None:
        args.rounds = 1 if args.what == "overlap" else 3
    {"accuracy": accuracy, "speed": speed, "step": step, "wire": wire,
     "overlap": overlap}[args.what](args)


if __name__ == "__main__":
    main()
