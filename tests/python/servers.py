"""What the Python tests share: shardps-server processes on loopback, and
torch, which CI must have."""

import os
import subprocess
import tempfile
import time

BIN = os.environ.get("SHARDPS_BIN", "build/bin")


class Servers:
    """`n` shardps-server processes on loopback (each with `flags`),
    stopped on close()."""

    def __init__(self, n, job, flags=()):
        self.dir = tempfile.TemporaryDirectory(prefix="shardps-py")
        self.procs, self.addrs = [], []
        for i in range(n):
            port_file = os.path.join(self.dir.name, f"port-{i}")
            self.procs.append(subprocess.Popen(
                [os.path.join(BIN, "shardps-server"), "--host=127.0.0.1",
                 "--port=0", f"--port_file={port_file}", f"--job={job}",
                 *flags],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            deadline = time.time() + 20
            while not os.path.exists(port_file) and time.time() < deadline:
                time.sleep(0.02)
            with open(port_file) as f:
                self.addrs.append(f"127.0.0.1:{f.read().strip()}")

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()
        self.dir.cleanup()


def require_torch(test):
    """torch, or the test skipped (failed in CI, which installs it)."""
    try:
        import torch
        return torch
    except ImportError:
        if os.environ.get("CI") == "true":
            test.fail("python3-torch is missing in CI "
                      "(deploy/install-deps.sh installs it)")
        test.skipTest("python3-torch is not installed")
