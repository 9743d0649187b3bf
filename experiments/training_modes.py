#!/usr/bin/python3
"""Which consistency, which optimizer, how much traffic: Fashion-MNIST
mlp:784-256-256-10 trained by S servers and N workers (local processes) under
each compression codec, each server-side optimizer and each consistency mode,
one run per setting. Writes OUT/results.csv (abkit's columns: the final
model's test accuracy, bytes on the wire per step, ...) and OUT/table.md.

  experiments/training_modes.py [--epochs 10] [--servers 2] [--workers 2]
      [--only compression,optimizer,consistency] [--out DIR]

The data set is converted once from Debian's copy of Fashion-MNIST
(shardps-data fashion-mnist) into OUT/data; runs go to OUT/runs/.
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402

# Every group varies one thing against the same reference: Adam with the
# cosine schedule, async, float32 on the wire.
REFERENCE = ["--optimizer=adam", "--lr_schedule=cosine"]
GROUPS = {
    "compression": [
        (f"compression={c}", REFERENCE + [f"--compression={c}"])
        for c in ("none", "fp16", "bf16", "onebit")
    ],
    "optimizer": [
        ("sgd", ["--optimizer=sgd", "--lr_schedule=cosine"]),
        ("momentum", ["--optimizer=momentum", "--lr_schedule=cosine"]),
        ("nesterov", ["--optimizer=nesterov", "--lr_schedule=cosine"]),
        ("adagrad", ["--optimizer=adagrad", "--lr_schedule=cosine"]),
        ("adam", REFERENCE),
        ("adam, constant lr", ["--optimizer=adam"]),
    ],
    "consistency": [
        (f"consistency={c}", REFERENCE + [f"--consistency={c}"])
        for c in ("async", "sync", "ssp:2")
    ],
}


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(
        abkit.ROOT, "experiments", "results", "training_modes"))
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--only", default=",".join(GROUPS),
                    help="comma-separated groups to run")
    args = ap.parse_args()
    data = os.path.join(args.out, "data")
    if not os.path.exists(os.path.join(data, "train", "manifest.txt")):
        subprocess.run([abkit.binary("shardps-data"), "fashion-mnist",
                        f"--out={data}", "--shards=8"], check=True)
    os.makedirs(args.out, exist_ok=True)
    rows, labels = [], []
    for group in args.only.split(","):
        for label, flags in GROUPS[group]:
            name = f"{group}-{label}".replace(" ", "_").replace(",", "")
            print(f"{group}: {label} ...", flush=True)
            row = abkit.run_point(
                os.path.join(args.out, "runs", name), args.servers,
                args.workers,
                "parallel", data, {},
                flags + [f"--epochs={args.epochs}", f"--batch={args.batch}",
                         "--progress_every=0"], cluster="local")
            rows.append(row)
            labels.append((group, label))
            abkit.write_rows(os.path.join(args.out, "results.csv"), rows)
    lines = [
        f"Fashion-MNIST, mlp:784-256-256-10, {args.servers} servers, "
        f"{args.workers} workers, batch {args.batch}, {args.epochs} epochs; "
        "accuracy of the final model on the 10,000 test images.", "",
        "| group | setting | test accuracy | pull KiB/step | push KiB/step "
        "| total vs float32 | samples/s |", "|---|---|---|---|---|---|---|"]
    base = next((r["bytes_per_step"] for (g, l), r in zip(labels, rows)
                 if l == "compression=none"), None)
    for (group, label), r in zip(labels, rows):
        if not r["ok"]:
            lines.append(f"| {group} | {label} | failed: see {r['run_dir']} |")
            continue
        ratio = f"{r['bytes_per_step'] / base:.2f}" if base else ""
        lines.append(
            f"| {group} | {label} | {100 * r['final_test_accuracy']:.2f}% "
            f"| {r['pull_bytes_per_step'] / 1024:.0f} "
            f"| {r['push_bytes_per_step'] / 1024:.0f} | {ratio} "
            f"| {r['samples_per_second']:.0f} |")
    text = "\n".join(lines)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n")
    print()
    print(text)


if __name__ == "__main__":
    main()
