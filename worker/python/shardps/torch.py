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

Thread-safety: one optimizer is for one training loop's thread.
"""

import time

import torch

import shardps

__all__ = ["DistributedOptimizer", "broadcast_parameters"]

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
