"""What shardps-launch gives a Python worker, and what the worker leaves in
the run directory for it.

shardps-launch --worker_script=train.py runs `python3 train.py <flags after
--> <the launcher's flags>`, the launcher's flags being those it gives the
C++ shardps-worker: --server_addrs (or --etcd and --num_servers), --job,
--rank, --world, --run_dir, --loader, --overlap, --data, --auth_token_file,
--tls_ca/--tls_cert/--tls_key, --trace/--trace_name, --metrics_port/
--metrics_host. A script reads them, beside its own, with

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    shardps.worker.add_arguments(parser)
    args = shardps.worker.parse(parser)      # rank and world resolved
    client = shardps.worker.connect(args)

Without --rank and --world (a script started by Slurm, mpirun or a
Kubernetes Indexed Job), they come from the same environment variables as
the C++ worker's: SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/
OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE, JOB_COMPLETION_INDEX.

RunLog writes RUN_DIR/metrics-RANK.csv (a line per step, the C++ worker's
columns) and RUN_DIR/summary-RANK.json (proto/summary.proto WorkerSummary),
from which the launcher shows progress and builds the run's summary.
"""

import argparse
import json
import os
import time

import shardps

__all__ = ["add_arguments", "parse", "connect", "RunLog", "PhaseTimes"]

# (rank variable, world variable), in the C++ worker's order
# (worker/train/cluster_env.cc).
_RANK_WORLD_ENV = (("SLURM_PROCID", "SLURM_NTASKS"),
                   ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                   ("PMI_RANK", "PMI_SIZE"),
                   ("JOB_COMPLETION_INDEX", None))


def add_arguments(parser):
    """Adds the launcher's worker flags to `parser` (an ArgumentParser)."""
    g = parser.add_argument_group("shardps (given by shardps-launch)")
    g.add_argument("--server_addrs", default="",
                   help="host:port of each server, in shard order")
    g.add_argument("--etcd", default="",
                   help="etcd endpoint naming each shard's primary")
    g.add_argument("--num_servers", type=int, default=0,
                   help="with --etcd: the number of shards")
    g.add_argument("--job", default="default")
    g.add_argument("--rank", type=int, default=-1,
                   help="this worker's rank (default: from the environment)")
    g.add_argument("--world", type=int, default=-1,
                   help="workers in the job (default: from the environment)")
    g.add_argument("--run_dir", default=".")
    g.add_argument("--data", default="")
    g.add_argument("--loader", default="parallel")
    g.add_argument("--overlap", default="none")
    g.add_argument("--consistency", default="async",
                   help="async, sync or ssp:K")
    g.add_argument("--compression", default="none",
                   help="none, fp16, bf16 or onebit")
    g.add_argument("--straggler_timeout_s", type=float, default=60.0)
    g.add_argument("--straggler_policy", default="fail")
    g.add_argument("--auth_token_file", default="")
    g.add_argument("--tls_ca", default="")
    g.add_argument("--tls_cert", default="")
    g.add_argument("--tls_key", default="")
    g.add_argument("--trace", default="",
                   help="Chrome trace file written when the client closes")
    g.add_argument("--trace_name", default="")
    g.add_argument("--rpc_timeout_s", type=float, default=30.0)
    g.add_argument("--retry_give_up_s", type=float, default=60.0)
    # Accepted so that the launcher's --metrics_port works with Python
    # workers; a Python worker serves no Prometheus endpoint.
    g.add_argument("--metrics_port", type=int, default=-1,
                   help=argparse.SUPPRESS)
    g.add_argument("--metrics_host", default="", help=argparse.SUPPRESS)
    return parser


def parse(parser=None, argv=None, environ=None):
    """Parses argv (default sys.argv[1:]) with `parser` (default: one with
    only the launcher's flags) and resolves rank and world; a bad value
    exits with argparse's message naming the flag or variable."""
    if parser is None:
        parser = add_arguments(argparse.ArgumentParser())
    args = parser.parse_args(argv)
    try:
        args.rank, args.world = resolve_rank_world(
            args.rank, args.world, os.environ if environ is None else environ)
    except ValueError as e:
        parser.error(str(e))
    if not args.server_addrs and not args.etcd:
        parser.error("--server_addrs (or --etcd) is required")
    return args


def resolve_rank_world(rank, world, environ):
    """(rank, world): the flags where given (>= 0), else the environment,
    else (0, 1). ValueError naming the source of a bad value."""
    sources = {"rank": "--rank", "world": "--world"}
    found = {"rank": rank, "world": world}
    for rank_var, world_var in _RANK_WORLD_ENV:
        for key, var in (("rank", rank_var), ("world", world_var)):
            if var is None or found[key] >= 0 or var not in environ:
                continue
            text = environ[var]
            if not text.isdigit():
                raise ValueError(f"{var}='{text}' is not a non-negative "
                                 "integer")
            found[key], sources[key] = int(text), var
    for key, default in (("rank", 0), ("world", 1)):
        if found[key] < 0:
            found[key], sources[key] = default, "default"
    rank, world = found["rank"], found["world"]
    if world < 1 or rank >= world:
        raise ValueError(f"rank {rank} (from {sources['rank']}) is not below "
                         f"world {world} (from {sources['world']})")
    return rank, world


def connect(args, wait_ready_seconds=60.0):
    """A shardps.Client for `args` (parse's), once every server serves."""
    client = shardps.Client(
        [a for a in args.server_addrs.split(",") if a], job=args.job,
        worker=args.rank, auth_token_file=args.auth_token_file,
        tls_ca=args.tls_ca, tls_cert=args.tls_cert, tls_key=args.tls_key,
        timeout_seconds=args.rpc_timeout_s,
        retry_seconds=args.retry_give_up_s, compression=args.compression,
        etcd=args.etcd, num_servers=args.num_servers, trace=args.trace,
        trace_name=args.trace_name or f"worker-{args.rank}")
    client.wait_ready(wait_ready_seconds)
    return client


class PhaseTimes:
    """Seconds of one step's phases, as the step log has them."""

    def __init__(self, read=0.0, compute=0.0, pull=0.0, push=0.0):
        self.read, self.compute, self.pull, self.push = read, compute, pull, push


class RunLog:
    """This worker's step log and summary in the run directory (the files
    the launcher reads; their columns and fields are the C++ worker's)."""

    HEADER = ("epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,"
              "end_unix_s\n")

    def __init__(self, run_dir, rank, world):
        os.makedirs(run_dir, exist_ok=True)
        self.run_dir, self.rank, self.world = run_dir, rank, world
        self.started = time.time()
        self.first_step = self.last_step = None
        self.steps = self.samples = 0
        self.totals = PhaseTimes()
        self._out = open(os.path.join(run_dir, f"metrics-{rank}.csv"), "w")
        self._out.write(self.HEADER)
        self._out.flush()

    def step(self, epoch, batch, loss, times):
        """Logs one step of `batch` samples and its PhaseTimes."""
        now = time.time()
        if self.first_step is None:
            self.first_step = now - (times.read + times.compute + times.pull
                                     + times.push)
        self.last_step = now
        self.steps += 1
        self.samples += batch
        for phase in ("read", "compute", "pull", "push"):
            setattr(self.totals, phase,
                    getattr(self.totals, phase) + getattr(times, phase))
        self._out.write(
            f"{epoch},{self.steps},{batch},{loss:.5f},{times.read * 1e3:.3f},"
            f"{times.compute * 1e3:.3f},{times.pull * 1e3:.3f},"
            f"{times.push * 1e3:.3f},{now:.6f}\n")
        self._out.flush()  # a killed worker's file is whole up to here

    def close(self, **fields):
        """Writes summary-RANK.json: the step totals, plus `fields`
        (WorkerSummary's, e.g. test_accuracy, partition_records,
        first_epoch_loss, last_epoch_loss, optimizer, consistency,
        compression, model, model_params, pull_bytes, push_bytes)."""
        self._out.close()
        now = time.time()
        first = self.first_step if self.first_step is not None else now
        last = self.last_step if self.last_step is not None else now
        train = max(last - first, 0.0)
        summary = {
            "rank": self.rank, "world": self.world,
            "init_seconds": first - self.started,
            "train_seconds": train,
            "samples_per_second": self.samples / train if train > 0 else 0.0,
            "test_accuracy": -1.0,
            "steps": self.steps, "samples": self.samples,
            "read_seconds": self.totals.read,
            "compute_seconds": self.totals.compute,
            "pull_seconds": self.totals.pull,
            "push_seconds": self.totals.push,
        }
        summary.update(fields)
        path = os.path.join(self.run_dir, f"summary-{self.rank}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(summary, f)
        os.replace(path + ".tmp", path)
