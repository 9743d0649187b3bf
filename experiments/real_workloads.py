#!/usr/bin/python3
"""Real workloads: the convolutional models of model/README.md trained on
Fashion-MNIST through the servers, and their training speed against PyTorch.

  experiments/real_workloads.py accuracy [--epochs 12] [--out DIR]
      The LeNet-class CNN, 2 servers + 2 workers (local processes), once
      with each loader; the final model's test accuracy.
  experiments/real_workloads.py speed [--rounds 3] [--out DIR]
      shardps-worker --bench=model against experiments/peers/torch_model.py,
      the same spec, batch and one thread, alternating; medians and ratio.

Each writes OUT/<what>.md (a table) and OUT/<what>.csv; the data set is
converted once from Debian's Fashion-MNIST into OUT/data.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402

LENET = "cnn:c32k5-p2-c64k5-p2-f1024-10"
# The same stack before its classifier, with AlexNet's classifier widths.
LARGE = "cnn:c32k5-p2-c64k5-f4096-f4096-10"
FASHION_SHAPE = "28x28x1"


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


def bench(cmd):
    """samples_per_s of the one JSON line `cmd` prints."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    if not lines:
        sys.exit(f"{cmd[0]} printed nothing: {out.stderr.strip()}")
    return json.loads(lines[-1])["samples_per_s"]


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


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["accuracy", "speed"])
    ap.add_argument("--out", default=os.path.join(
        abkit.ROOT, "experiments", "results", "real_workloads"))
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    args = ap.parse_args()
    {"accuracy": accuracy, "speed": speed}[args.what](args)


if __name__ == "__main__":
    main()
