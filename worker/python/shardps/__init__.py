"""shardps: the sharded parameter servers from Python.

    import numpy as np, shardps
    client = shardps.Client(["127.0.0.1:7070", "127.0.0.1:7071"], job="demo")
    client.create_table("model", 1000, optimizer={"name": "sgd",
                                                  "learning_rate": 0.1})
    weights = np.empty(1000, np.float32)
    client.pull("model", 0, 1000, out=weights)
    client.push("model", 0, 1000, grad=np.ones(1000, np.float32))

Values move in place (no copies in Python): `out` must be a writable,
C-contiguous float32 buffer of end - begin values (a NumPy array or a CPU
torch tensor, whose memory is used as it is), `grad` and `values` C-contiguous
float32 ones. Calls release the GIL. A failed call raises shardps.Error,
whose `code` and `code_name` are the status code (e.g. 5, "NOT_FOUND") and
whose `message` names what failed.

shardps.torch trains a PyTorch model through the servers
(DistributedOptimizer, broadcast_parameters); shardps.worker reads the
flags shardps-launch gives a worker.
"""

import json
import sys

from shardps._errors import Error
from shardps._shardps import Client as _Client
from shardps._shardps import Reach as _Reach

__all__ = ["Client", "Error", "consistency"]


def consistency(spelling, workers=1, straggler_timeout_seconds=60.0,
                straggler_policy="fail"):
    """The table consistency the C++ worker's --consistency spells:
    "async", "sync" or "ssp:K" (K >= 1), for `workers` workers, with its
    --straggler_timeout_s and --straggler_policy (fail or drop), as
    Client.create_table takes it."""
    if spelling == "async":
        return {"mode": "CONSISTENCY_ASYNC"}
    if spelling == "sync":
        config = {"mode": "CONSISTENCY_SYNC"}
    elif spelling.startswith("ssp:") and spelling[4:].isdigit() \
            and int(spelling[4:]) >= 1:
        config = {"mode": "CONSISTENCY_SSP", "staleness": int(spelling[4:])}
    else:
        raise ValueError(f"consistency must be async, sync or ssp:K (K >= 1), "
                         f"got {spelling!r}")
    if straggler_policy not in ("fail", "drop"):
        raise ValueError(f"straggler_policy must be fail or drop, got "
                         f"{straggler_policy!r}")
    config.update(num_workers=workers,
                  straggler_timeout_seconds=straggler_timeout_seconds,
                  straggler_policy=f"STRAGGLER_{straggler_policy.upper()}")
    return config


class Client:
    """A worker's handle on the servers (ps::Client): shard i of every
    table lives on server_addrs[i] (or, with etcd, on the primary of shard
    i of num_servers that etcd names). TLS: tls_ca alone for TLS, with
    tls_cert and tls_key for mutual TLS; auth_token_file: the job's token.
    timeout_seconds bounds every call; retry_seconds > 0 retries calls to
    servers that are away (UNAVAILABLE) for that long. compression: none,
    fp16, bf16 or onebit, as the C++ worker's --compression.
    shared_memory: float32 values to and from servers on this host go
    through shared memory instead of TCP (ps::ClientOptions). trace: a
    Chrome trace file written on close(), with this client's calls and the
    spans record_span() adds, under the process name trace_name. A client
    is a context manager that closes itself."""

    def __init__(self, server_addrs=(), job="default", worker=0,
                 auth_token_file="", tls_ca="", tls_cert="", tls_key="",
                 timeout_seconds=30.0, retry_seconds=0.0, compression="none",
                 etcd="", num_servers=0, trace="", trace_name="",
                 shared_memory=True):
        if isinstance(server_addrs, str):
            server_addrs = [a for a in server_addrs.split(",") if a]
        reach = _Reach()
        reach.server_addrs = list(server_addrs)
        reach.etcd = etcd
        reach.num_servers = num_servers
        reach.job = job
        reach.worker = worker
        reach.compression = compression
        reach.shared_memory = shared_memory
        self._client = _Client(reach, _read_token(auth_token_file), tls_ca,
                               tls_cert, tls_key, timeout_seconds,
                               retry_seconds, trace, trace_name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Ends the client and writes its trace; no call may race it, and
        later calls raise Error (FAILED_PRECONDITION)."""
        self._client.close()

    @property
    def num_servers(self):
        return self._client.num_servers

    def wait_ready(self, timeout_seconds=20.0):
        """Waits until every server serves; Error naming the first that
        did not."""
        self._client.wait_ready(timeout_seconds)

    def create_table(self, name, num_params, optimizer=None, init=None,
                     consistency=None):
        """Creates `name` of num_params float32 keys on every server (or
        finds the identical one another worker created). optimizer, init
        and consistency are dicts of proto/shardps.proto's OptimizerConfig,
        InitConfig and ConsistencyConfig fields (shardps.consistency()
        spells the last), e.g. {"name": "adam", "learning_rate": 1e-3}."""
        self._client.create_table(name, num_params, _json(optimizer),
                                  _json(init), _json(consistency))

    def open_table(self, name, num_params, consistency=None,
                   timeout_seconds=60.0):
        """Waits until `name` (created by another worker) is on every
        server with num_params keys, then makes it usable here."""
        self._client.open_table(name, num_params, _json(consistency),
                                timeout_seconds)

    def pull(self, table, begin, end, out, clock=0):
        """Keys [begin, end) of `table` into `out`, in place; returns out."""
        self._client.pull(table, begin, end, _buffer(out), clock)
        return out

    def push(self, table, begin, end, grad, clock=0, lr_scale=1.0):
        """Sends the gradient for keys [begin, end); applied exactly once.
        A NaN or Inf anywhere refuses all of it before anything is sent."""
        self._client.push(table, begin, end, _buffer(grad), clock, lr_scale)

    def push_pull(self, table, begin, end, grad, out, clock=0, lr_scale=1.0):
        """push, then the keys' fresh values into `out` (which may be
        grad), in one round trip per piece; returns out."""
        self._client.push_pull(table, begin, end, _buffer(grad), _buffer(out),
                               clock, lr_scale)
        return out

    def assign(self, table, begin, end, values):
        """Replaces the values of keys [begin, end) with `values` (float32
        on the wire whatever the compression), exactly once; not ordered
        with other workers' pushes, so call it before training starts."""
        self._client.assign(table, begin, end, _buffer(values))

    def create_row_table(self, name, dim, max_rows_per_shard, optimizer=None,
                         init=None, sharding="hash", id_space=0):
        """Creates the sparse table `name` (ps/README.md): rows of `dim`
        float32 keyed by any uint64 id, each made on first touch from
        `init` (its values depend only on the seed and the id), at most
        max_rows_per_shard per server, spread by a hash of the id or
        ("range") by equal ranges of [0, id_space)."""
        self._client.create_row_table(name, dim, max_rows_per_shard,
                                      _json(optimizer), _json(init), sharding,
                                      id_space)

    def open_row_table(self, name):
        """Makes the sparse table `name`, created by another worker, usable
        here."""
        self._client.open_row_table(name)

    def row_dim(self, table):
        """The row width of a sparse table created or opened here."""
        return self._client.row_dim(table)

    def pull_rows(self, table, ids, out, create=True):
        """Row ids[i] into out[i] (out holds len(ids) x dim float32; an id
        may repeat); rows not held yet are made unless create is False,
        when such an id is an Error. ids: uint64 or int64; returns out."""
        self._client.pull_rows(table, _buffer(ids), _buffer(out), create)
        return out

    def push_rows(self, table, ids, grads, lr_scale=1.0):
        """Row gradients grads[i] for ids[i]; repeated ids are summed and
        each row is applied once on its server, exactly once."""
        self._client.push_rows(table, _buffer(ids), _buffer(grads), lr_scale)

    def record_span(self, name, start, end):
        """Adds a span of the calling thread to the trace (nothing without
        one): name is one of step, read, compute, pull, push, push_pull,
        wait, broadcast, evaluate; start and end are time.time() values."""
        self._client.record_span(name, start, end)

    def stats(self):
        """Each server's StatsResponse as a dict, in shard order."""
        return [json.loads(s) for s in self._client.stats()]

    @property
    def push_bytes(self):
        """Bytes pushed so far: messages as on the wire, and values that
        went through shared memory instead; pull_bytes likewise."""
        return self._client.push_bytes

    @property
    def pull_bytes(self):
        return self._client.pull_bytes


def _buffer(values):
    """A torch tensor as the NumPy array sharing its memory (so that it is
    used in place); anything else as it is, for the buffer protocol."""
    torch = sys.modules.get("torch")  # a tensor means torch was imported
    if torch is not None and isinstance(values, torch.Tensor):
        if values.device.type != "cpu":
            raise ValueError(f"a tensor on {values.device} cannot be used in "
                             "place; move it to the CPU first")
        return values.detach().numpy()
    return values


def _read_token(path):
    """The token in `path` without surrounding whitespace, as the C++
    worker reads --auth_token_file; "" for no path."""
    if not path:
        return ""
    with open(path) as f:  # OSError names a missing or unreadable file
        token = f.read().strip()
    if not token:
        raise ValueError(f"auth_token_file {path} is empty")
    return token


def _json(config):
    return "" if config is None else json.dumps(config)
