#!/usr/bin/env python3
"""PyTorch peer for a PushPull step (`shardps-bench`'s push_pull phase):
PyTorch's RPC parameter server in the shape of its official tutorial
("Implementing a Parameter Server Using Distributed RPC Framework"). A
parameter server process holds the parameters behind an RRef; a trainer
process's step sends a gradient with rpc_sync, the server applies it (plain
SGD) and answers with the parameters. Both on loopback, TensorPipe backend.

    python3 experiments/peers/torch_rpc_ps.py --params 1000000 --seconds 5

Prints one JSON line: the step's p50/p99 in ms, steps/s and MB/s each way.
Without PyTorch (Debian: python3-torch) it says so and exits 0.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time


class ParameterServer:
    """The tutorial's server object: parameters, updated in place."""

    def __init__(self, params):
        import torch
        self.params = torch.zeros(params)

    @staticmethod
    def step(ps_rref, grad):
        ps = ps_rref.local_value()
        ps.params.add_(grad, alpha=-0.01)
        return ps.params


def timed_steps(step, seconds, warmup):
    """Calls step() `warmup` times, then for `seconds`; each timed call's
    seconds."""
    for _ in range(warmup):
        step()
    times = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


def run_ranks(mp, target, ranks, args, results):
    """target(rank, args, port, queue) in `ranks` spawned processes that
    meet on a free loopback port; the first `results` things they put on
    the queue, once all have ended."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, args, port, queue))
             for r in range(ranks)]
    for p in procs:
        p.start()
    out = [queue.get() for _ in range(results)]
    for p in procs:
        p.join()
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(rank, args, port, queue):
    import torch
    import torch.distributed.rpc as rpc
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=8,
                                              rpc_timeout=120)
    rpc.init_rpc(["ps", "trainer"][rank], rank=rank, world_size=2,
                 rpc_backend_options=options)
    if rank == 1:
        ps_rref = rpc.remote("ps", ParameterServer, args=(args.params,))
        grad = torch.full((args.params,), 1e-6)

        def step():
            rpc.rpc_sync("ps", ParameterServer.step, args=(ps_rref, grad))

        queue.put(timed_steps(step, args.seconds, warmup=5))
    rpc.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=1000000)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError:
        print("torch_rpc_ps: PyTorch is not installed (apt-get install "
              "python3-torch); skipping", file=sys.stderr)
        return 0
    times = run_ranks(mp, run, 2, args, results=1)[0]
    times.sort()
    p50 = statistics.median(times)
    mb = args.params * 4 / 1e6
    print(json.dumps({
        "peer": "torch_rpc", "torch": torch.__version__,
        "params": args.params, "steps": len(times),
        "step_p50_ms": round(1e3 * p50, 3),
        "step_p99_ms": round(1e3 * times[int(0.99 * (len(times) - 1))], 3),
        "steps_per_s": round(len(times) / sum(times), 1),
        "MBps_each_way": round(mb * len(times) / sum(times), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
