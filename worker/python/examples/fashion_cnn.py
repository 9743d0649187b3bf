#!/usr/bin/python3
"""A PyTorch CNN trained on Fashion-MNIST through the shardps servers: each
worker trains on its share of the training set (every world-th image from
its rank on) and steps with shardps.torch.DistributedOptimizer; rank 0
evaluates the final model on the 10,000 test images.

    build/bin/shardps-launch --servers=2 --workers=2 --run_dir=/tmp/cnn \\
        --worker_script=worker/python/examples/fashion_cnn.py -- --epochs=5

The model is the C++ worker's LeNet class (its cnn:c32k5-p2-c64k5-p2-f1024-10)
by default; --conv and --hidden make it smaller. The data are the IDX files
of Debian's dataset-fashion-mnist (--data_dir).
"""

import argparse
import gzip
import os
import time

# One BLAS thread per worker, as the C++ worker's --blas_threads=1, unless
# the environment says otherwise: torch.set_num_threads leaves Debian's
# OpenBLAS threads, which spin on the cores the servers and clients need.
# Read when torch loads, so set before it is imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import shardps.torch  # noqa: E402
import shardps.worker  # noqa: E402


def read_idx(path):
    """An IDX file (gzip or not) as a NumPy array of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 8:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
                  for i in range(dims))
    body = np.frombuffer(data, np.uint8, offset=4 + 4 * dims)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {body.size} bytes of data for shape "
                         f"{shape}")
    return body.reshape(shape)


def load(data_dir, split):
    """(images as float32 N x 1 x 28 x 28 in [0, 1], labels as int64)."""
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


class Cnn(nn.Module):
    """conv(c1, 5x5) - pool - conv(c2, 5x5) - pool - dense(hidden) - 10, with
    ReLUs: the C++ worker's cnn:cC1k5-p2-cC2k5-p2-fHIDDEN-10."""

    def __init__(self, c1=32, c2=64, hidden=1024):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 5, padding=2)
        self.conv2 = nn.Conv2d(c1, c2, 5, padding=2)
        self.fc1 = nn.Linear(c2 * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def accuracy(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]) \
                .sum().item()
    model.train()
    return correct / len(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--optimizer", default="adam",
                        help="the servers' optimizer: sgd, momentum, adam")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--conv", default="32,64",
                        help="channels of the two convolutions")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for the model (OpenBLAS's: "
                        "OPENBLAS_NUM_THREADS)")
    parser.add_argument("--max_steps", type=int, default=0,
                        help="stop after this many steps (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data_dir",
                        default="/usr/share/datasets/fashion-mnist")
    shardps.worker.add_arguments(parser)
    args = shardps.worker.parse(parser)
    started = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed + args.rank)  # rank 0's weights win anyway

    x, y = load(args.data_dir, "train")
    # Every rank takes as many steps (a sync step waits for all of them).
    per_rank = len(x) // args.world
    x = x[args.rank::args.world][:per_rank]
    y = y[args.rank::args.world][:per_rank]
    test_x, test_y = load(args.data_dir, "test") if args.rank == 0 else (
        None, None)
    c1, c2 = (int(c) for c in args.conv.split(","))
    model = Cnn(c1, c2, args.hidden)
    optimizer = {"name": args.optimizer, "learning_rate": args.lr}
    if args.optimizer == "adam":
        optimizer.update(beta1=0.9, beta2=0.999, epsilon=1e-8)
    elif args.optimizer == "momentum":
        optimizer.update(momentum=0.9)
    client = shardps.worker.connect(args)
    opt = shardps.torch.DistributedOptimizer(
        model.named_parameters(), client, optimizer=optimizer,
        consistency=args.consistency, world=args.world, rank=args.rank,
        straggler_timeout_seconds=args.straggler_timeout_s,
        straggler_policy=args.straggler_policy)
    shardps.torch.broadcast_parameters(opt)
    log = shardps.worker.RunLog(args.run_dir, args.rank, args.world)
    log.started = started

    generator = torch.Generator().manual_seed(args.seed * 1000 + args.rank)
    losses = []
    steps = 0
    for epoch in range(args.epochs):
        order = torch.randperm(len(x), generator=generator)
        epoch_loss, batches = 0.0, 0
        for i in range(0, len(x) - args.batch + 1, args.batch):
            t0 = time.time()
            idx = order[i:i + args.batch]
            xb, yb = x[idx], y[idx]
            t1 = time.time()
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            t2 = time.time()
            opt.step()
            client.record_span("compute", t1, t2)
            log.step(epoch, args.batch, loss.item(), shardps.worker.PhaseTimes(
                read=t1 - t0, compute=t2 - t1, pull=opt.pull_seconds))
            epoch_loss += loss.item()
            batches += 1
            steps += 1
            if args.max_steps and steps >= args.max_steps:
                break
        losses.append(epoch_loss / max(batches, 1))
        print(f"worker {args.rank}: epoch {epoch} loss {losses[-1]:.4f}",
              flush=True)
        if args.max_steps and steps >= args.max_steps:
            break
    test_accuracy = -1.0
    if args.rank == 0:
        start = time.time()
        test_accuracy = accuracy(model, test_x, test_y)
        client.record_span("evaluate", start, time.time())
        print(f"worker 0: test accuracy {test_accuracy:.4f}", flush=True)
    log.close(test_accuracy=test_accuracy, partition_records=len(x),
              first_epoch_loss=losses[0] if losses else 0.0,
              last_epoch_loss=losses[-1] if losses else 0.0,
              optimizer=f'name: "{args.optimizer}" learning_rate: {args.lr}',
              consistency=args.consistency, compression=args.compression,
              model=f"torch:cnn:c{c1}k5-p2-c{c2}k5-p2-f{args.hidden}-10",
              model_params=opt.num_params, pull_bytes=client.pull_bytes,
              push_bytes=client.push_bytes, overlap="none")
    client.close()


if __name__ == "__main__":
    main()
