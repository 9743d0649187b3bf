"""PyTorch through the shardps servers, in the shape of Horovod's and
BytePS's helpers:

    model = Net()
    opt = shardps.torch.DistributedOptimizer(
        model.named_parameters(), client, optimizer={"name": "sgd",
        "learning_rate": 0.05}, consistency="sync", world=args.world,
        rank=args.rank)
    shardps.torch.broadcast_parameters(opt)   # rank 0's weights everywhere
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()        # one PushPull: gradients in, fresh weights back

The model's parameters become one table: each parameter is a key range
[offset, offset + numel) in named_parameters() order. The optimizer runs
on the servers (proto/shardps.proto OptimizerConfig), so a step is one
round trip per piece and the model is only ever written by the servers'
answers. The parameters and their gradients are re-seated as views of two
flat float32 buffers, so that the answer lands in the parameters and the
gradients are sent from where backward put them, with no copies in Python.
The consistency ("async", "sync", "ssp:K") and compression are the C++
worker's; a sync or ssp step waits on the servers for the other workers.

Embedding tables too large for a worker live in a sparse table instead
(ps/README.md): shardps.torch.EmbeddingBag pulls the rows of a batch's ids
in forward and pushes their gradients by id in backward, where the
servers apply them with the table's own optimizer:

    emb = shardps.torch.EmbeddingBag(client, "emb", dim=16,
                                     max_rows_per_shard=10**7,
                                     optimizer={"name": "adagrad", ...})
    x = torch.cat([emb(ids).flatten(1), dense], 1)   # ids: [B, fields]

Thread-safety: one optimizer is for one training loop's thread.
"""

import time

import torch

import shardps

__all__ = ["DistributedOptimizer", "EmbeddingBag", "broadcast_parameters"]

# The one-key table that says a broadcast is done takes no pushes; a table
# needs a valid optimizer all the same.
_MARKER_OPTIMIZER = {"name": "sgd", "learning_rate": 1.0}


class DistributedOptimizer:
    """The servers' optimizer over `named_parameters` (a model's
    named_parameters(); those not requiring grad are left out), in table
    `table` of `client`. optimizer: OptimizerConfig fields as a dict;
    consistency: "async", "sync" or "ssp:K" for `world` workers, of which
    this is worker `rank` (its client's worker id must be the same).
    init: the table's InitConfig for the keys (broadcast_parameters
    replaces them with rank 0's weights)."""

    def __init__(self, named_parameters, client, table="model",
                 optimizer=None, consistency="async", world=1, rank=0,
                 straggler_timeout_seconds=60.0, straggler_policy="fail",
                 init=None):
        self.client, self.table = client, table
        self.rank, self.world = rank, world
        self.optimizer = optimizer or {"name": "sgd", "learning_rate": 0.01}
        self.consistency = shardps.consistency(
            consistency, world, straggler_timeout_seconds, straggler_policy)
        self.init = init
        self.named = [(n, p) for n, p in named_parameters if p.requires_grad]
        if not self.named:
            raise ValueError("the model has no parameters that require grad")
        for name, p in self.named:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError(f"parameter {name} is {p.dtype} on "
                                 f"{p.device}; shardps holds float32 on the "
                                 "CPU")
        self.offsets = {}
        total = 0
        for name, p in self.named:
            self.offsets[name] = (total, total + p.numel())
            total += p.numel()
        self.num_params = total
        self.values = torch.empty(total, dtype=torch.float32)
        self.grads = torch.zeros(total, dtype=torch.float32)
        with torch.no_grad():
            for name, p in self.named:
                begin, end = self.offsets[name]
                self.values[begin:end].copy_(p.detach().reshape(-1))
                p.data = self.values[begin:end].view_as(p)
                p.grad = self.grads[begin:end].view_as(p)
        self.clock = 0
        self.pull_seconds = 0.0  # of the last step: waiting for the servers
        self._table_ready = False

    def named_ranges(self):
        """(name, begin, end) of each parameter in the table."""
        return [(n, *self.offsets[n]) for n, _ in self.named]

    def zero_grad(self, set_to_none=False):
        """Zeroes the flat gradient in place (the gradients stay views of
        it whatever set_to_none says, so that step() sends them as they
        are)."""
        del set_to_none
        self.grads.zero_()

    def step(self, closure=None, lr_scale=1.0):
        """Sends the gradients and takes the servers' new values into the
        parameters: one PushPull of the whole table at this worker's clock.
        Returns closure()'s loss when given, as torch optimizers do."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._ensure_table()
        self._reseat_grads()
        start = time.time()
        self.client.push_pull(self.table, 0, self.num_params, self.grads,
                              self.values, self.clock, lr_scale)
        end = time.time()
        self.client.record_span("push_pull", start, end)
        self.pull_seconds = end - start
        self.clock += 1
        return loss

    def pull(self):
        """The table's values into the parameters (at this worker's clock,
        so under sync and ssp it waits as a step's answer would)."""
        self._ensure_table()
        self.client.pull(self.table, 0, self.num_params, self.values,
                         self.clock)

    def _ensure_table(self):
        if self._table_ready:
            return
        if self.rank == 0:
            self.client.create_table(self.table, self.num_params,
                                     optimizer=self.optimizer, init=self.init,
                                     consistency=self.consistency)
        else:
            self.client.open_table(self.table, self.num_params,
                                   consistency=self.consistency)
        self._table_ready = True

    def _reseat_grads(self):
        # Code that replaced a parameter's .grad (zero_grad(set_to_none) of
        # a torch optimizer, a hook) left it outside the flat buffer: copy it
        # back in and make it a view again.
        with torch.no_grad():
            for name, p in self.named:
                begin, end = self.offsets[name]
                view = self.grads[begin:end]
                if p.grad is None:
                    view.zero_()
                elif p.grad.data_ptr() != view.data_ptr():
                    view.copy_(p.grad.reshape(-1))
                else:
                    continue
                p.grad = view.view_as(p)


def broadcast_parameters(optimizer, timeout_seconds=300.0):
    """Makes rank 0's current parameters the table's and every rank's: rank
    0 creates the table, assigns its weights to it (Assign: exactly the
    float32 values, whatever the optimizer or compression) and then
    creates the one-key table TABLE.broadcast as the sign that it is done;
    the other ranks wait for that sign (up to timeout_seconds) and pull.
    Call it once, before the first step, on every rank, and only on a fresh
    table: a run that goes on with a trained table takes it with
    optimizer.pull() instead."""
    o = optimizer
    start = time.time()
    o._ensure_table()
    done = o.table + ".broadcast"
    if o.rank == 0:
        o.client.assign(o.table, 0, o.num_params, o.values)
        o.client.create_table(done, 1, optimizer=_MARKER_OPTIMIZER)
    else:
        o.client.open_table(done, 1, timeout_seconds=timeout_seconds)
    o.pull()
    o.client.record_span("broadcast", start, time.time())


class _PulledRows(torch.autograd.Function):
    """Rows of `ids` pulled in forward; their gradients pushed by id in
    backward (repeats summed by the client), nothing for the ids."""

    @staticmethod
    def forward(ctx, anchor, module, ids):
        del anchor  # only there so that autograd calls backward
        flat = ids.reshape(-1).contiguous()
        rows = torch.empty(flat.numel(), module.dim, dtype=torch.float32)
        module.client.pull_rows(module.table, flat, rows)
        ctx.module, ctx.ids = module, flat
        return rows.view(*ids.shape, module.dim)

    @staticmethod
    def backward(ctx, grad):
        m = ctx.module
        grads = grad.contiguous().view(-1, m.dim)
        m.client.push_rows(m.table, ctx.ids, grads, m.lr_scale)
        return None, None, None


class EmbeddingBag(torch.nn.Module):
    """torch.nn.EmbeddingBag(mode="sum") over a sparse table of `client`:
    forward(ids) takes int64 ids [B, fields] (one id a field) or [B,
    fields, bag] (a bag summed per field) and returns [B, fields, dim].
    The rows are made on first touch from `init` and updated on the
    servers by `optimizer` when backward pushes their gradients (so they
    are not among the module's parameters). The worker that creates the
    table passes create=True; the others open it."""

    def __init__(self, client, table, dim, max_rows_per_shard=None,
                 optimizer=None, init=None, sharding="hash", id_space=0,
                 create=True):
        super().__init__()
        self.client, self.table, self.dim = client, table, dim
        self.lr_scale = 1.0
        if create:
            if max_rows_per_shard is None:
                raise ValueError("creating a sparse table needs "
                                 "max_rows_per_shard")
            client.create_row_table(table, dim, max_rows_per_shard,
                                    optimizer=optimizer, init=init,
                                    sharding=sharding, id_space=id_space)
        else:
            client.open_row_table(table)
            if client.row_dim(table) != dim:
                raise ValueError(f"table {table} has rows of "
                                 f"{client.row_dim(table)} floats, not {dim}")
        # Autograd calls a Function's backward only when one of its inputs
        # requires grad: this zero-size one does.
        self._anchor = torch.zeros(0, requires_grad=True)

    def forward(self, ids):
        if ids.dtype != torch.int64 or ids.dim() not in (2, 3):
            raise ValueError("ids must be int64 [batch, fields] or [batch, "
                             f"fields, bag], not {ids.dtype} "
                             f"{list(ids.shape)}")
        rows = _PulledRows.apply(self._anchor, self, ids)
        return rows if ids.dim() == 2 else rows.sum(2)
