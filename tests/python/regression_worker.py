#!/usr/bin/python3
"""A Python worker for the tests, run by shardps-launch --worker_script:
least squares y = X w on rank-specific data (LinearData), through
shardps.torch with SGD on the servers. Saves rank 0's broadcast weights
(initial-RANK.npy, as every rank had them after broadcast_parameters) and
the weights of its last step's answer (final-RANK.npy) in the run
directory, with the step log and summary the launcher reads."""

import argparse
import os
import time

import numpy as np

FEATURES = 8
SAMPLES = 32


def linear_data(rank):
    """(X, y) of worker `rank`: X ~ N(0, 1) seeded by rank, y = X w* with
    w* = 1, 2, ..., FEATURES and bias 0.5."""
    rng = np.random.default_rng(100 + rank)
    x = rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32)
    w = np.arange(1, FEATURES + 1, dtype=np.float32)
    return x, (x @ w + np.float32(0.5)).astype(np.float32)


def main():
    import torch
    import shardps.torch
    import shardps.worker
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.05)
    shardps.worker.add_arguments(parser)
    args = shardps.worker.parse(parser)
    torch.manual_seed(args.rank)  # every rank starts from its own weights
    model = torch.nn.Linear(FEATURES, 1)
    x, y = (torch.from_numpy(a) for a in linear_data(args.rank))
    client = shardps.worker.connect(args)
    opt = shardps.torch.DistributedOptimizer(
        model.named_parameters(), client, table="linear",
        optimizer={"name": "sgd", "learning_rate": args.lr},
        consistency=args.consistency, world=args.world, rank=args.rank)
    shardps.torch.broadcast_parameters(opt)
    np.save(os.path.join(args.run_dir, f"initial-{args.rank}.npy"),
            opt.values.numpy())
    log = shardps.worker.RunLog(args.run_dir, args.rank, args.world)
    for _ in range(args.steps):
        start = time.time()
        opt.zero_grad()
        loss = torch.mean((model(x).squeeze(1) - y) ** 2)
        loss.backward()
        computed = time.time()
        opt.step()
        log.step(0, SAMPLES, loss.item(), shardps.worker.PhaseTimes(
            compute=computed - start, pull=opt.pull_seconds))
    np.save(os.path.join(args.run_dir, f"final-{args.rank}.npy"),
            opt.values.numpy())
    log.close(partition_records=SAMPLES, consistency=args.consistency,
              compression=args.compression,
              model_params=opt.num_params, pull_bytes=client.pull_bytes,
              push_bytes=client.push_bytes)
    client.close()


if __name__ == "__main__":
    main()
