#!/usr/bin/env python3
"""PyTorch peer for `shardps-worker --bench=model`: the same network, batch
and update (forward, backward, plain SGD step) on one thread, on random data.

    python3 experiments/peers/torch_model.py --model mlp:784-256-256-10 --batch 128
    python3 experiments/peers/torch_model.py \\
        --model cnn:28x28x1-c32k5-p2-c64k5-p2-f1024-10 --batch 64

Reads the same model specs as shardps (model/model_spec.h): an mlp, or a cnn
that names its input shape (convolutions are stride 1 without padding,
followed by ReLU; pooling is max pooling of stride equal to its window).
Prints one JSON line like the worker's --json. Without PyTorch (Debian:
python3-torch) it says so and exits 0, so scripts can run it unconditionally.
"""
import argparse
import json
import re
import sys
import time


def parse_spec(spec):
    """(input shape as (H, W, C), layers as (kind, units, kernel)) or an
    error naming the spec."""
    kind, _, rest = spec.partition(":")
    tokens = rest.split("-")
    if kind == "mlp" and len(tokens) >= 2 and all(t.isdigit() for t in tokens):
        widths = [int(t) for t in tokens]
        return (1, 1, widths[0]), [("f", w, 0) for w in widths[1:]]
    if kind != "cnn" or len(tokens) < 3 or not re.fullmatch(
            r"\d+x\d+(x\d+)?", tokens[0]) or not tokens[-1].isdigit():
        sys.exit(f"torch_model: --model {spec!r} is not mlp:IN-...-CLASSES "
                 "or cnn:HxWxC-LAYERS...-CLASSES")
    dims = [int(d) for d in tokens[0].split("x")] + [1]
    layers = []
    for t in tokens[1:-1]:
        m = re.fullmatch(r"c(\d+)k(\d+)|p(\d+)|f(\d+)", t)
        if not m:
            sys.exit(f"torch_model: layer {t!r} of {spec!r} is not cFkK, pP "
                     "or fN")
        if m.group(1):
            layers.append(("c", int(m.group(1)), int(m.group(2))))
        elif m.group(3):
            layers.append(("p", 0, int(m.group(3))))
        else:
            layers.append(("f", int(m.group(4)), 0))
    layers.append(("f", int(tokens[-1]), 0))
    return tuple(dims[:3]), layers


def build(torch, shape, layers):
    """nn.Sequential of the spec: ReLU after every layer with weights but
    the last, a flatten before the first dense layer."""
    h, w, c = shape
    modules, flat = [], None
    for i, (kind, units, kernel) in enumerate(layers):
        last = i + 1 == len(layers)
        if kind == "c":
            modules += [torch.nn.Conv2d(c, units, kernel), torch.nn.ReLU()]
            h, w, c = h - kernel + 1, w - kernel + 1, units
        elif kind == "p":
            modules.append(torch.nn.MaxPool2d(kernel))
            h, w = h // kernel, w // kernel
        else:
            if flat is None:
                flat = h * w * c
                modules.append(torch.nn.Flatten())
            modules.append(torch.nn.Linear(flat, units))
            flat = units
            if not last:
                modules.append(torch.nn.ReLU())
    return torch.nn.Sequential(*modules)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp:784-256-256-10")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    shape, layers = parse_spec(args.model)
    try:
        import torch
    except ImportError:
        print("torch_model: PyTorch is not installed (apt-get install "
              "python3-torch); skipping", file=sys.stderr)
        return 0

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    net = build(torch, shape, layers)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    h, w, c = shape
    conv = layers[0][0] != "f"
    x = torch.rand(args.batch, c, h, w) if conv else torch.rand(
        args.batch, h * w * c)
    y = torch.arange(args.batch) % layers[-1][1]

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
