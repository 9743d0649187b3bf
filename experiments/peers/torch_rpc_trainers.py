#!/usr/bin/env python3
"""PyTorch peer of shardps.torch training: PyTorch's RPC parameter server in
the shape of its official tutorials (a parameter server process holding the
model behind an RRef, updated by a torch optimizer under a lock as each
trainer's gradients arrive, answering with the parameters), and WORKERS
trainer processes that each step: forward and backward of an MLP on a
batch, then one rpc_sync carrying every gradient and bringing back every
parameter, copied into the trainer's model. Loopback, TensorPipe backend,
one torch thread per process.

    python3 experiments/peers/torch_rpc_trainers.py --layers 784,1024,200,10 \\
        --workers 2 --seconds 10

Prints one JSON line: parameters, steps/s of all trainers together, each
trainer's step p50 in ms. Without PyTorch it says so and exits 0.
"""
import argparse
import json
import os
import statistics
import sys
import threading

from torch_rpc_ps import run_ranks, timed_steps


def mlp(layers):
    """Linear layers of the given widths with ReLUs between them."""
    import torch.nn as nn
    widths = [int(w) for w in layers.split(",")]
    modules = []
    for i in range(len(widths) - 1):
        modules.append(nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            modules.append(nn.ReLU())
    return nn.Sequential(*modules)


class ParameterServer:
    """The model and its SGD, updated one trainer's gradients at a time."""

    def __init__(self, layers, lr):
        import torch
        torch.manual_seed(0)
        self.model = mlp(layers)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.lock = threading.Lock()

    @staticmethod
    def step(ps_rref, grads):
        ps = ps_rref.local_value()
        with ps.lock:
            for p, g in zip(ps.model.parameters(), grads):
                p.grad = g
            ps.optimizer.step()
            return [p.detach().clone() for p in ps.model.parameters()]


def run(rank, args, port, queue):
    import torch
    import torch.distributed.rpc as rpc
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8,
                                              rpc_timeout=300)
    name = "ps" if rank == 0 else f"trainer{rank}"
    rpc.init_rpc(name, rank=rank, world_size=args.workers + 1,
                 rpc_backend_options=options)
    if rank == 1:
        ps_rref = rpc.remote("ps", ParameterServer, args=(args.layers,
                                                          args.lr))
        for r in range(2, args.workers + 1):
            rpc.rpc_sync(f"trainer{r}", start_training, args=(ps_rref,))
        queue.put(train(ps_rref, args))
    elif rank > 1:
        _TRAINED.wait()  # start_training's thread, before RPC shuts down
    rpc.shutdown()


# Trainers 2..N: what their process was given, and when their training is
# over.
_GIVEN = {}
_TRAINED = threading.Event()


def start_training(ps_rref):
    """Runs on trainers 2..N: trains in a thread of this process (the RPC
    that started it returns at once)."""
    def body():
        _GIVEN["queue"].put(train(ps_rref, _GIVEN["args"]))
        _TRAINED.set()
    threading.Thread(target=body).start()


def train(ps_rref, args):
    """Steps for args.seconds after a warm-up; the step times."""
    import torch
    import torch.distributed.rpc as rpc
    import torch.nn.functional as F
    model = mlp(args.layers)
    widths = [int(w) for w in args.layers.split(",")]
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, widths[0], generator=generator)
    y = torch.randint(0, widths[-1], (args.batch,), generator=generator)

    def step():
        model.zero_grad()
        F.cross_entropy(model(x), y).backward()
        fresh = rpc.rpc_sync("ps", ParameterServer.step,
                             args=(ps_rref, [p.grad for p in
                                             model.parameters()]))
        with torch.no_grad():
            for p, v in zip(model.parameters(), fresh):
                p.copy_(v)

    return timed_steps(step, args.seconds, warmup=3)


def process(rank, args, port, queue):
    _GIVEN.update(args=args, queue=queue)
    run(rank, args, port, queue)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="784,1024,200,10")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("torch_rpc_trainers: PyTorch is not installed (apt-get install "
              "python3-torch); skipping", file=sys.stderr)
        return 0
    per_trainer = run_ranks(mp, process, args.workers + 1, args,
                            results=args.workers)
    params = sum(p.numel() for p in mlp(args.layers).parameters())
    print(json.dumps({
        "peer": "torch_rpc", "torch": torch.__version__, "params": params,
        "workers": args.workers, "batch": args.batch,
        "steps_per_s": round(sum(len(t) / sum(t) for t in per_trainer), 2),
        "step_p50_ms": [round(1e3 * statistics.median(t), 2)
                        for t in per_trainer]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
