#!/usr/bin/python3
"""The shardps Python package (worker/python) against two real servers:
values round-trip through NumPy and torch buffers in place, buffers that
are not float32, C-contiguous or the range's size are refused by name,
failed calls raise shardps.Error with their status code, and a call
blocked in the servers lets other Python threads run (the GIL is
released).

Needs build/python (PYTHONPATH) and build/bin (SHARDPS_BIN); exits 77
(skipped) when the package was not built."""

import json
import os
import sys
import tempfile
import threading
import time
import unittest

try:
    import numpy as np
    import shardps
    from servers import Servers, require_torch
except ImportError as e:
    print(f"SKIP: the shardps package is not importable ({e}); build it "
          "with pybind11-dev and set PYTHONPATH=build/python")
    sys.exit(77)

# Status codes (absl / gRPC).
INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, UNAVAILABLE = 3, 4, 5, 14
UNAUTHENTICATED = 16


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.servers = Servers(2, "pyjob")

    @classmethod
    def tearDownClass(cls):
        cls.servers.close()

    def client(self, worker=0, **kw):
        c = shardps.Client(self.servers.addrs, job="pyjob", worker=worker,
                           **kw)
        c.wait_ready()
        return c

    def test_numpy_round_trip_in_place(self):
        c = self.client()
        self.assertEqual(c.num_servers, 2)
        c.create_table("np", 1000, optimizer={"name": "sgd",
                                              "learning_rate": 0.5})
        before = c.stats()
        grad = np.arange(1000, dtype=np.float32)
        c.push("np", 0, 1000, grad)
        out = np.full((10, 100), 7, np.float32)  # any C-contiguous shape
        self.assertIs(c.pull("np", 0, 1000, out), out)
        np.testing.assert_array_equal(out.ravel(), -0.5 * grad)
        # A sub-range, and push_pull in place (out is grad): one more
        # step of 0.5 on keys [100, 300), all on shard 0 (keys [0, 500)).
        part = np.ones(200, np.float32)
        c.push_pull("np", 100, 300, part, part)
        np.testing.assert_array_equal(part, -0.5 * grad[100:300] - 0.5)
        after = c.stats()
        self.assertEqual([s["job"] for s in after], ["pyjob", "pyjob"])

        def calls(stats, key):  # uint64 fields are strings in JSON
            return [int(s.get(key, 0)) for s in stats]
        for key, expected in (("push_requests", [1, 1]),
                              ("pull_requests", [1, 1]),
                              ("push_pull_requests", [1, 0])):
            self.assertEqual(
                [a - b for a, b in zip(calls(after, key),
                                       calls(before, key))], expected, key)
        self.assertGreater(c.push_bytes, 4000 + 800)

    def test_torch_tensors_share_their_memory(self):
        torch = require_torch(self)
        c = self.client()
        c.create_table("torch", 64, optimizer={"name": "sgd",
                                               "learning_rate": 1.0},
                       init={"kind": "constant", "value": 2.0})
        weights = torch.zeros(8, 8)
        self.assertIs(c.pull("torch", 0, 64, weights), weights)
        self.assertTrue(torch.equal(weights, torch.full((8, 8), 2.0)))
        # A parameter that requires grad is written in place all the same.
        param = torch.nn.Parameter(torch.zeros(64))
        c.push_pull("torch", 0, 64, torch.ones(64), param)
        self.assertTrue(torch.equal(param.detach(), torch.ones(64)))
        with self.assertRaisesRegex(TypeError, "out must hold float32"):
            c.pull("torch", 0, 64, torch.zeros(64, dtype=torch.float64))
        with self.assertRaisesRegex(ValueError, "must be C-contiguous"):
            c.pull("torch", 0, 64, torch.zeros(8, 8).t())

    def test_assign_sets_exact_values_whatever_the_compression(self):
        torch = require_torch(self)
        with self.client(compression="fp16") as c:
            c.create_table("assign", 1000, optimizer={"name": "adam",
                                                      "learning_rate": 0.1,
                                                      "beta1": 0.9,
                                                      "beta2": 0.999,
                                                      "epsilon": 1e-8})
            # Values fp16 cannot hold, which an fp16 push would round.
            values = torch.arange(1000, dtype=torch.float32) / 3 + 1e-4
            c.assign("assign", 0, 1000, values)
            got = np.zeros(1000, np.float32)
            with self.client() as exact:
                exact.open_table("assign", 1000)
                exact.pull("assign", 0, 1000, got)
            np.testing.assert_array_equal(got, values.numpy())
            values[3] = float("inf")
            with self.assertRaises(shardps.Error) as e:
                c.assign("assign", 0, 1000, values)
            self.assertEqual(e.exception.code, INVALID_ARGUMENT)
            self.assertIn("values for 'assign' keys [0, 1000) contains NaN "
                          "or Inf", e.exception.message)
        with self.assertRaises(shardps.Error) as e:
            c.pull("assign", 0, 1000, got)
        self.assertEqual(e.exception.code_name, "FAILED_PRECONDITION")
        self.assertIn("closed", e.exception.message)
        # An fp16 client's pushes are rounded to fp16 on the wire.
        with self.client(compression="fp16") as half:
            half.create_table("half", 4, optimizer={"name": "sgd",
                                                    "learning_rate": 1.0})
            half.push("half", 0, 4, np.full(4, 1 / 3, np.float32))
        with self.client() as exact:
            exact.open_table("half", 4)
            np.testing.assert_array_equal(
                exact.pull("half", 0, 4, np.empty(4, np.float32)),
                np.full(4, -0.333251953125, np.float32))
        with self.assertRaises(shardps.Error) as e:
            self.client(compression="zip")
        self.assertEqual(e.exception.code, INVALID_ARGUMENT)
        self.assertIn("compression 'zip'", e.exception.message)

    def test_a_trace_holds_the_calls_and_the_recorded_spans(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "w.trace.json")
            c = self.client(trace=path, trace_name="worker-7")
            c.create_table("traced", 10, optimizer={"name": "sgd",
                                                    "learning_rate": 1.0})
            values = np.zeros(10, np.float32)
            c.push_pull("traced", 0, 10, values, values)
            now = time.time()
            c.record_span("compute", now - 0.5, now)
            with self.assertRaisesRegex(ValueError, "span 'think' is not"):
                c.record_span("think", now, now)
            c.close()
            with open(path) as f:
                events = json.load(f)["traceEvents"]
        names = {e["name"] for e in events}
        self.assertIn("push_pull_rpc", names)
        self.assertIn("compute", names)
        compute = next(e for e in events if e["name"] == "compute")
        self.assertAlmostEqual(compute["dur"], 500000, delta=1000)
        self.assertIn("worker-7", json.dumps(events))

    def test_sparse_rows_by_id_from_numpy_and_torch(self):
        c = self.client()
        c.create_row_table("emb", 4, 1000,
                           optimizer={"name": "sgd", "learning_rate": 1.0},
                           init={"kind": "constant", "value": 0.5})
        self.assertEqual(c.row_dim("emb"), 4)
        ids = np.array([5, 9, 5], np.uint64)
        out = np.zeros((3, 4), np.float32)
        self.assertIs(c.pull_rows("emb", ids, out), out)
        np.testing.assert_array_equal(out, 0.5)
        # Id 5 twice: its gradients are summed, then applied once.
        c.push_rows("emb", ids, np.ones((3, 4), np.float32))
        other = self.client(worker=1)
        other.open_row_table("emb")
        self.assertEqual(other.row_dim("emb"), 4)
        got = np.zeros((2, 4), np.float32)
        other.pull_rows("emb", np.array([5, 9], np.uint64), got, create=False)
        np.testing.assert_array_equal(got[0], -1.5)
        np.testing.assert_array_equal(got[1], -0.5)
        torch = require_torch(self)
        rows = torch.zeros(2, 4)
        c.pull_rows("emb", torch.tensor([9, 5]), rows)  # int64 ids
        np.testing.assert_array_equal(rows.numpy(), got[::-1])
        # Bad input is named and changes nothing.
        with self.assertRaisesRegex(TypeError, "ids must hold uint64"):
            c.pull_rows("emb", np.array([1.0, 2.0]), out[:2])
        with self.assertRaisesRegex(ValueError, "out has 12 values"):
            c.pull_rows("emb", np.array([1, 2], np.uint64), out)
        with self.assertRaises(shardps.Error) as e:
            c.pull_rows("emb", np.array([77], np.uint64), out[:1],
                        create=False)
        self.assertEqual(e.exception.code, NOT_FOUND)
        self.assertIn("row 77 does not exist", str(e.exception))
        bad = np.ones((1, 4), np.float32)
        bad[0, 2] = np.nan
        with self.assertRaises(shardps.Error) as e:
            c.push_rows("emb", np.array([9], np.uint64), bad)
        self.assertEqual(e.exception.code, INVALID_ARGUMENT)
        with self.assertRaises(shardps.Error) as e:
            c.pull_rows("nope", ids, out)
        self.assertEqual(e.exception.code, NOT_FOUND)
        with self.assertRaisesRegex(ValueError, "sharding must be"):
            c.create_row_table("x", 4, 10, sharding="modulo")
        other.pull_rows("emb", np.array([5, 9], np.uint64), got)
        np.testing.assert_array_equal(got[1], -0.5)
        other.close()

    def test_buffers_are_checked_by_name(self):
        c = self.client()
        c.create_table("buf", 100, optimizer={"name": "sgd",
                                              "learning_rate": 0.1})
        with self.assertRaisesRegex(TypeError, "out must hold float32"):
            c.pull("buf", 0, 100, np.zeros(100, np.float64))
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            c.pull("buf", 0, 100, np.zeros((100, 2), np.float32)[:, 0])
        with self.assertRaisesRegex(ValueError, "has 99 values; keys"):
            c.pull("buf", 0, 100, np.zeros(99, np.float32))
        frozen = np.zeros(100, np.float32)
        frozen.flags.writeable = False
        with self.assertRaisesRegex(TypeError, "writable"):
            c.pull("buf", 0, 100, frozen)
        with self.assertRaisesRegex(TypeError, "grad must be"):
            c.push("buf", 0, 100, [0.0] * 100)
        with self.assertRaisesRegex(ValueError, "before begin"):
            c.pull("buf", 10, 5, np.zeros(0, np.float32))
        c.push("buf", 0, 100, frozen)  # a read-only gradient is fine

    def test_errors_carry_status_codes(self):
        c = self.client()
        with self.assertRaises(shardps.Error) as e:
            c.pull("never_created", 0, 4, np.zeros(4, np.float32))
        self.assertEqual((e.exception.code, e.exception.code_name),
                         (NOT_FOUND, "NOT_FOUND"))
        self.assertIn("never_created", e.exception.message)
        with self.assertRaises(shardps.Error) as e:
            c.create_table("bad", 10, optimizer={"name": "sgd",
                                                 "learning_rte": 0.1})
        self.assertEqual(e.exception.code, INVALID_ARGUMENT)
        self.assertIn("learning_rte", e.exception.message)
        with self.assertRaises(shardps.Error) as e:
            c.create_table("bad", 10, optimizer={"name": "nosuch",
                                                 "learning_rate": 0.1})
        self.assertEqual(e.exception.code, INVALID_ARGUMENT)
        c.create_table("nan", 10, optimizer={"name": "sgd",
                                             "learning_rate": 0.1})
        grad = np.zeros(10, np.float32)
        grad[7] = np.nan
        with self.assertRaises(shardps.Error) as e:
            c.push("nan", 0, 10, grad)
        self.assertEqual(e.exception.code, INVALID_ARGUMENT)
        self.assertIn("NaN", e.exception.message)
        values = np.ones(10, np.float32)
        c.pull("nan", 0, 10, values)
        np.testing.assert_array_equal(values, 0)  # nothing was applied
        with self.assertRaises(ValueError):
            shardps.consistency("ssp:0")
        with self.assertRaises(FileNotFoundError):
            shardps.Client(self.servers.addrs, auth_token_file="/nonexistent")
        with tempfile.NamedTemporaryFile("w") as empty:
            with self.assertRaisesRegex(ValueError, "is empty"):
                shardps.Client(self.servers.addrs,
                               auth_token_file=empty.name)
        gone = shardps.Client(["127.0.0.1:1"], job="pyjob",
                              timeout_seconds=1)
        with self.assertRaises(shardps.Error) as e:
            gone.wait_ready(timeout_seconds=1)
        self.assertIn(e.exception.code, (UNAVAILABLE, DEADLINE_EXCEEDED))
        self.assertIn("127.0.0.1:1", e.exception.message)

    def test_the_jobs_token_is_sent_and_a_wrong_one_refused(self):
        with tempfile.TemporaryDirectory() as d:
            right, wrong = os.path.join(d, "right"), os.path.join(d, "wrong")
            with open(right, "w") as f:
                f.write("s3cret-token\n")
            with open(wrong, "w") as f:
                f.write("guess")
            guarded = Servers(1, "tok", [f"--auth_token_file={right}"])
            try:
                c = shardps.Client(guarded.addrs, job="tok",
                                   auth_token_file=right)
                c.wait_ready()
                c.create_table("t", 4, optimizer={"name": "sgd",
                                                  "learning_rate": 1.0})
                c.push("t", 0, 4, np.ones(4, np.float32))
                np.testing.assert_array_equal(
                    c.pull("t", 0, 4, np.zeros(4, np.float32)), -1)
                for token in (wrong, ""):
                    intruder = shardps.Client(guarded.addrs, job="tok",
                                              auth_token_file=token)
                    with self.assertRaises(shardps.Error) as e:
                        intruder.create_table(
                            "t", 4, optimizer={"name": "sgd",
                                               "learning_rate": 1.0})
                    self.assertEqual(e.exception.code, UNAUTHENTICATED)
            finally:
                guarded.close()

    def test_a_blocked_call_lets_other_threads_run(self):
        # Under sync, worker 0's pull at clock 1 waits for worker 1's push
        # of clock 0. That push comes from this thread while the pull is
        # blocked in another: if the pull held the GIL, it would time out.
        sync = shardps.consistency("sync", workers=2)
        w0, w1 = self.client(0, timeout_seconds=20), self.client(1)
        w0.create_table("sync", 8, optimizer={"name": "sgd",
                                              "learning_rate": 1.0},
                        consistency=sync)
        w1.open_table("sync", 8, consistency=sync)
        w0.push("sync", 0, 8, np.ones(8, np.float32), clock=0)
        got, failed = np.zeros(8, np.float32), []

        def pull():
            try:
                w0.pull("sync", 0, 8, got, clock=1)
            except shardps.Error as e:
                failed.append(e)

        t = threading.Thread(target=pull)
        t.start()
        w1.push("sync", 0, 8, np.full(8, 2, np.float32), clock=0)
        t.join()
        self.assertEqual(failed, [])
        # Clock 0 applied as the mean of both pushes, at learning rate 1.
        np.testing.assert_array_equal(got, -1.5)


if __name__ == "__main__":
    unittest.main()
