#!/usr/bin/env python3
"""What replication (--replicas=2) costs a push, with each replica on a host
of its own.

On one machine every process shares the same cores, so shardps-bench
--spawn_servers --replicas=2 measures the CPU the backup and the forwarding
add, not what a cluster would see. Here the emulated cluster
(cluster/emucluster.sh) gives the client, the single server and the two
replicas hosts of their own with capped links, etcd on the control host,
and shardps-bench (--server_addrs for R=1, --etcd for R=2) measures both in
one run, alternating, --repeats times each; medians and ratios are printed
and written to experiments/results/replication/.

  sudo python3 experiments/replication_cost.py [--link=1gbit]
      [--params=1000000,10000000] [--seconds=5] [--repeats=3]
      [--chunk_kb=0 (each client's default)]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
EMU = os.path.join(ROOT, "experiments", "cluster", "emucluster.sh")
ETCD = "/usr/bin/etcd"


def netns(name, host, argv, **kw):
    return ["ip", "netns", "exec", f"{name}-{host}"] + argv


class Cluster:
    """The emulated hosts: s0 (R=1), s1 and s2 (R=2), w0 (the bench)."""

    def __init__(self, args, work):
        self.name = f"rcost{os.getpid()}"
        self.subnet = args.subnet
        self.work = work
        self.procs = []
        # Servers off loopback need a token (or TLS).
        token = os.path.join(work, "job.token")
        with open(token, "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        os.chmod(token, 0o600)
        self.token_flag = f"--auth_token_file={token}"
        subprocess.run([EMU, "up", f"--name={self.name}", "--servers=3",
                        "--workers=1", f"--subnet={self.subnet}",
                        f"--server_link={args.link}",
                        f"--worker_link={args.link}"], check=True)

    def address(self, kind, i):
        return f"{self.subnet}.{1 if kind == 's' else 2}.{i + 1}"

    def start(self, host, argv, log):
        with open(os.path.join(self.work, log), "w") as out:
            p = subprocess.Popen(netns(self.name, host, argv), stdout=out,
                                 stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []

    def down(self):
        self.stop()
        subprocess.run([EMU, "down", f"--name={self.name}"], check=False)


def wait_for_port_file(path, proc, what, log):
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    with open(log) as f:
        tail = f.read()[-2000:]
    raise RuntimeError(f"{what} did not start within 30 s "
                       f"(exit {proc.poll()}):\n{tail}")


def start_servers(c, job):
    """One plain server on s0; replicas 0 and 1 of one shard on s1, s2;
    fresh ones for each table size (the bench's table is named "bench")."""
    etcd = f"http://{c.subnet}.0.1:2379"
    c.start("ctl", [ETCD, "--name=rcost", f"--data-dir={c.work}/etcd-{job}",
                    f"--listen-client-urls={etcd}",
                    f"--advertise-client-urls={etcd}",
                    f"--listen-peer-urls=http://{c.subnet}.0.1:2380"],
            "etcd.log")
    servers = [("s0", 0, [f"--job={job}-r1", c.token_flag])]
    for r in range(2):
        servers.append((f"s{r + 1}", r + 1,
                        [f"--job={job}-r2", c.token_flag, f"--etcd={etcd}",
                         "--shard=0",
                         f"--replica={r}"]))
    for host, i, extra in servers:
        port_file = os.path.join(c.work, f"{job}-{host}.port")
        p = c.start(host, [os.path.join(BIN, "shardps-server"),
                           f"--host={c.address('s', i)}", "--port=7070",
                           f"--port_file={port_file}"] + extra,
                    f"{job}-{host}.log")
        wait_for_port_file(port_file, p, host,
                           os.path.join(c.work, f"{job}-{host}.log"))
    return etcd


def bench(c, args, params, workers, target):
    argv = [os.path.join(BIN, "shardps-bench"), f"--params={params}",
            f"--workers={workers}",
            f"--seconds={args.seconds}", "--json", c.token_flag,
            f"--chunk_kb={args.chunk_kb}"] + target
    out = subprocess.run(netns(c.name, "w0", argv), capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"replication_cost: {' '.join(argv)}:\n{out.stdout}"
                 f"{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--link", default="1gbit",
                    help="every host's link, each way (a tc rate)")
    ap.add_argument("--params", default="1000000,10000000")
    ap.add_argument("--workers", default="1,2",
                    help="client threads, each a ps::Client of its own")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--chunk_kb", type=int, default=0,
                    help="the client's chunk size (shardps-bench --chunk_kb); "
                    "0: each client's default (smaller when replicated)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--subnet", default="10.214")
    ap.add_argument("--out",
                    default=os.path.join(ROOT, "experiments", "results",
                                         "replication"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("replication_cost: needs root (network namespaces and tc)")
    if not os.access(ETCD, os.X_OK):
        sys.exit(f"replication_cost: {ETCD} is missing "
                 "(deploy/install-deps.sh installs etcd-server)")
    work = tempfile.mkdtemp(prefix="shardps-rcost-")
    c = Cluster(args, work)
    rows = []
    try:
        points = [(int(p), int(w)) for p in args.params.split(",")
                  for w in args.workers.split(",")]
        for params, workers in points:
            job = f"p{params}w{workers}"
            etcd = start_servers(c, job)
            single = [f"--server_addrs={c.address('s', 0)}:7070",
                      f"--job={job}-r1"]
            replicated = [f"--etcd={etcd}", "--num_servers=1",
                          f"--job={job}-r2"]
            runs = {1: [], 2: []}
            for _ in range(args.repeats):
                runs[1].append(bench(c, args, params, workers, single))
                runs[2].append(bench(c, args, params, workers, replicated))
            row = {"params": params, "workers": workers}
            for r in (1, 2):
                row[f"r{r}_chunk_kb"] = runs[r][0]["push_chunk_kb"]
                for key in ("push_MBps", "pull_MBps", "push_p50_ms"):
                    row[f"r{r}_{key}"] = statistics.median(
                        x[key] for x in runs[r])
            row["push_ratio"] = row["r2_push_MBps"] / row["r1_push_MBps"]
            row["pull_ratio"] = row["r2_pull_MBps"] / row["r1_pull_MBps"]
            rows.append(row)
            c.stop()
    finally:
        c.down()
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    chunks = (f"push chunks of {rows[0]['r1_chunk_kb']} KiB (R=1) and "
              f"{rows[0]['r2_chunk_kb']} KiB (R=2)")
    lines = [f"links {args.link} each way, {chunks}, "
             f"{args.repeats} runs of "
             f"{args.seconds} s each, medians (MB/s of float32 parameters)",
             "| params | workers | R=1 push | R=2 push | push R=2/R=1 | R=1 pull | "
             "R=2 pull | pull R=2/R=1 | R=1 push p50 ms | R=2 push p50 ms |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['params']} | {r['workers']} | {r['r1_push_MBps']:.1f} | "
            f"{r['r2_push_MBps']:.1f} | {r['push_ratio']:.2f}x | "
            f"{r['r1_pull_MBps']:.1f} | {r['r2_pull_MBps']:.1f} | "
            f"{r['pull_ratio']:.2f}x | {r['r1_push_p50_ms']:.1f} | "
            f"{r['r2_push_p50_ms']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    chunk = f"{args.chunk_kb}k" if args.chunk_kb else "default"
    name = f"cost-{args.link}-chunk{chunk}.md"
    with open(os.path.join(args.out, name), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
