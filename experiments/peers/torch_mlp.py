#!/usr/bin/env python3
"""PyTorch peer for `shardps-bench --mode=model`: the same MLP, batch and
update (forward, backward, plain SGD step) on one thread, on random data.

    python3 experiments/peers/torch_mlp.py --model mlp:784-256-256-10 --batch 128

Prints one JSON line like shardps-bench --json. Without PyTorch (Debian:
python3-torch) it says so and exits 0, so scripts can run it unconditionally.
"""
import argparse
import json
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp:784-256-256-10")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    try:
        import torch
    except ImportError:
        print("torch_mlp: PyTorch is not installed (apt-get install "
              "python3-torch); skipping", file=sys.stderr)
        return 0

    if not args.model.startswith("mlp:"):
        sys.exit(f"torch_mlp: --model {args.model!r} is not mlp:IN-...-CLASSES")
    widths = [int(w) for w in args.model[4:].split("-")]
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.rand(args.batch, widths[0])
    y = torch.arange(args.batch) % widths[-1]

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    steps = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        step()
        steps += 1
    rate = steps * args.batch / (time.perf_counter() - start)
    print(json.dumps({"peer": "torch", "torch": torch.__version__,
                      "model": args.model, "batch": args.batch,
                      "threads": args.threads,
                      "samples_per_s": round(rate)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
