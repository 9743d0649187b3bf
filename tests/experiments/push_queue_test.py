#!/usr/bin/python3
"""What a pull's request queues behind, as the sweep measures it
(experiments/abkit.py: ss's unacked segments of a worker's connections to
its server) and as experiments/scale.py calibrates shardps-sim from it."""

import contextlib
import io
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "experiments")
sys.path.insert(0, EXPERIMENTS)
import abkit  # noqa: E402
import scale  # noqa: E402

# `ss -tinH dst 10.213.1.1` in a worker's namespace mid-push (trimmed): the
# channel carrying the push, and a second, idle connection to the server.
SS_MID_PUSH = """\
ESTAB 0      297235 [::ffff:10.213.2.1]:36604 [::ffff:10.213.1.1]:37163
\t bbr wscale:10,10 rto:220 rtt:19.975/4.391 ato:48 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:188 bytes_sent:8369069 unacked:187 retrans:0/1 rcv_space:14480
ESTAB 0      0      [::ffff:10.213.2.1]:36606 [::ffff:10.213.1.1]:37163
\t bbr wscale:10,10 rto:216 rtt:13.177/12.352 ato:40 mss:1400 pmtu:1500 rcvmss:1448 advmss:1448 cwnd:146 bytes_sent:236084 unacked:2 rcv_space:14480
"""
SS_IDLE = """\
ESTAB 0      0      [::ffff:10.213.2.1]:36604 [::ffff:10.213.1.1]:37163
\t bbr wscale:10,10 rto:220 rtt:19.975/4.391 ato:48 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:188 bytes_sent:8369069 rcv_space:14480
"""


class UnackedTest(unittest.TestCase):
    def test_sums_every_connection_at_its_own_mss(self):
        self.assertEqual(abkit.unacked(SS_MID_PUSH),
                         (189, 187 * 1448 + 2 * 1400))

    def test_a_connection_without_unacked_segments_counts_none(self):
        self.assertEqual(abkit.unacked(SS_IDLE), (0, 0))
        self.assertEqual(abkit.unacked(""), (0, 0))


def run(servers, workers, queue, ok=1, loader="parallel"):
    return {"servers": servers, "workers": workers, "loader": loader,
            "ok": ok, "push_queue_bytes": queue}


class PushQueueTest(unittest.TestCase):
    def test_mean_of_the_one_server_runs_of_several_workers(self):
        rows = [run(1, 1, ""), run(1, 2, 200e3), run(1, 4, 100e3),
                run(1, 8, 150e3, loader="sequential"),
                run(1, 16, 900e3, ok=0),  # failed
                run(2, 4, 900e3),  # a point the calibration never sees
                run(1, 16, "")]  # not sampled
        mean, runs = scale.push_queue(rows)
        self.assertAlmostEqual(mean, 150e3)
        self.assertEqual(runs, [(2, "parallel", 200e3),
                                (4, "parallel", 100e3),
                                (8, "sequential", 150e3)])

    def test_a_sweep_without_the_column_is_named(self):
        with self.assertRaises(SystemExit) as e, \
                contextlib.redirect_stderr(io.StringIO()):
            scale.push_queue([run(1, 2, ""), run(2, 2, 100e3)])
        self.assertIn("push_queue_bytes", str(e.exception.code))
        self.assertIn("make sweep", str(e.exception.code))


if __name__ == "__main__":
    unittest.main()
