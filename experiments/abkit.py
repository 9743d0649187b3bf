"""Shared pieces of the A/B experiments: running one shardps-launch point,
the CSV of results, and the plots. Python 3 standard library plus Debian's
python3-matplotlib; nothing from pip."""

import contextlib
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")

FIELDS = [
    "servers", "workers", "loader", "ok", "init_seconds", "train_seconds",
    "samples_per_second", "epoch_seconds", "step_seconds", "pull_ms",
    "push_ms", "compute_ms", "read_ms", "cpu_utilisation",
    "emulated_compute_ms", "batch", "steps", "param_bytes", "dataset_bytes",
    "server_link", "worker_link", "storage_link", "optimizer", "consistency",
    "compression", "bytes_per_step", "pull_bytes_per_step",
    "push_bytes_per_step", "final_test_accuracy", "transfer_cv",
    "dropped_packets", "steady_window_seconds", "init_runs",
    "push_queue_bytes", "run_dir",
]
TEXT_FIELDS = ("loader", "run_dir", "optimizer", "consistency", "compression",
               "init_runs")


def binary(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{path} is missing: run `make build` first")
    return path


@contextlib.contextmanager
def local_servers(n, job, cpus=None):
    """`n` shardps-server processes on loopback for `job`, killed on exit;
    yields their addresses in shard order. With `cpus` (taskset's list,
    e.g. "1") they run on those CPUs only."""
    with tempfile.TemporaryDirectory() as d:
        procs, addrs = [], []
        try:
            for i in range(n):
                port_file = os.path.join(d, f"port-{i}")
                pin = ["taskset", "-c", cpus] if cpus else []
                procs.append(subprocess.Popen(
                    pin + [binary("shardps-server"), "--host=127.0.0.1",
                           "--port=0", f"--port_file={port_file}",
                           f"--job={job}"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                deadline = time.time() + 20
                while not os.path.exists(port_file) and time.time() < deadline:
                    time.sleep(0.02)
                with open(port_file) as f:
                    addrs.append(f"127.0.0.1:{f.read().strip()}")
            yield addrs
        finally:
            for p in procs:
                p.kill()
                p.wait()


def dataset_bytes(data_dir):
    """Bytes of the training shards, from the manifest."""
    with open(os.path.join(data_dir, "train", "manifest.txt")) as f:
        return sum(int(b) for b in re.findall(r"^\s+bytes: (\d+)", f.read(), re.M))


def make_dataset(data_dir, samples, features=784, classes=10):
    """A synthetic data set (shardps-data), made once and reused."""
    if os.path.exists(os.path.join(data_dir, "train", "manifest.txt")):
        return
    subprocess.run([binary("shardps-data"), "synthetic", f"--out={data_dir}",
                    f"--samples={samples}", f"--features={features}",
                    f"--classes={classes}", "--shards=8"], check=True,
                   stdout=subprocess.DEVNULL)


def worker_steps(run_dir, workers):
    """Each worker's steps (its metrics-<rank>.csv rows), for the workers
    that wrote any."""
    out = []
    for rank in range(workers):
        path = os.path.join(run_dir, f"metrics-{rank}.csv")
        if os.path.exists(path):
            with open(path) as f:
                steps = list(csv.DictReader(f))
            if steps:
                out.append(steps)
    return out


def transfer_cv(per_worker):
    """How much one worker's pull and push times vary from step to step:
    their standard deviation over their mean, averaged over both and over
    the workers."""
    cvs = []
    for steps in per_worker:
        for key in ("pull_ms", "push_ms"):
            v = [float(s[key]) for s in steps]
            if len(v) > 1 and statistics.mean(v) > 0:
                cvs.append(statistics.pstdev(v) / statistics.mean(v))
    return statistics.mean(cvs) if cvs else 0.0


def steady_window(per_worker):
    """Seconds between the latest first step end and the earliest last step
    end: the window shardps-launch's steady samples/s is measured over
    (negative: some worker finished before another began)."""
    if not per_worker:
        return 0.0
    return (min(float(steps[-1]["end_unix_s"]) for steps in per_worker) -
            max(float(steps[0]["end_unix_s"]) for steps in per_worker))


def unacked(ss_info):
    """Of `ss -tin` output: the segments sent and not yet acknowledged over
    its connections, and their bytes (each connection's unacked x mss)."""
    pairs = [(int(u), int(m)) for m, u in re.findall(
        r"\bmss:(\d+)\b.*\bunacked:(\d+)", ss_info)]
    return sum(u for u, _ in pairs), sum(u * m for u, m in pairs)


class PushQueueSampler:
    """What a pull's request waits behind on a server's link: the push
    bytes worker 0 has in flight to server 0 (ss's unacked segments x mss,
    over its connections to it: gRPC keeps more than one), sampled every
    `period` seconds from the worker's network namespace while the
    emulated cluster launched by `launcher_pid` trains: from worker 0's
    first step logged in `run_dir` on, so that the sampling's CPU (nsenter
    and ss, about a tenth of the machine) falls on no start-up. The emulated
    links' shapers are the only queues, so bytes in flight are bytes
    queued. mean() is over the samples taken while a push was on its way
    (more than two segments in flight: a pull's request is one)."""

    def __init__(self, launcher_pid, run_dir, server="10.213.1.1",
                 period=0.05):
        self._ns = f"/var/run/netns/sps{launcher_pid}-w0"
        self._steps = os.path.join(run_dir, "metrics-0.csv")
        self._start = time.time()
        self._server = server
        self._period = period
        self._samples = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _training(self):
        try:
            if os.path.getmtime(self._steps) < self._start:
                return False  # an earlier run's
            with open(self._steps) as f:
                return sum(1 for _ in f) >= 2  # a header and a step
        except FileNotFoundError:
            return False

    def _run(self):
        while not self._done.is_set() and not self._training():
            self._done.wait(self._period)
        while not self._done.is_set():
            if os.path.exists(self._ns):
                out = subprocess.run(
                    ["nsenter", f"--net={self._ns}", "ss", "-tinH", "dst",
                     self._server], capture_output=True, text=True).stdout
                segments, in_flight = unacked(out)
                if segments > 2:
                    self._samples.append(in_flight)
            self._done.wait(self._period)

    def stop(self):
        self._done.set()
        self._thread.join()

    def mean(self):
        """None when no push was ever seen on its way."""
        return statistics.mean(self._samples) if self._samples else None


def run_point(run_dir, servers, workers, loader, data, links, worker_args,
              cluster="emulated", sample_push_queue=False, overlap="none"):
    """One shardps-launch run; returns its CSV row (ok=0 if it failed).
    sample_push_queue (emulated cluster only): the row's push_queue_bytes
    is PushQueueSampler's mean for the run. overlap: the workers'
    --overlap (a launcher flag)."""
    cmd = [binary("shardps-launch"), f"--cluster={cluster}",
           f"--servers={servers}", f"--workers={workers}",
           f"--loader={loader}", f"--overlap={overlap}",
           f"--run_dir={run_dir}", f"--data={data}", "--progress_s=5"]
    if cluster == "emulated":
        cmd += [f"--{k}_link={v}" for k, v in links.items()]
    cmd += ["--"] + worker_args
    os.makedirs(run_dir, exist_ok=True)
    with open(run_dir + ".log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        sampler = (PushQueueSampler(proc.pid, run_dir)
                   if sample_push_queue and cluster == "emulated" else None)
        proc.wait()
        if sampler:
            sampler.stop()
    with open(os.path.join(run_dir, "summary.json")) as f:
        s = json.load(f)
    w = s["per_worker"]
    steps = sum(x["steps"] for x in w) or 1
    per_worker = worker_steps(run_dir, workers)

    def per_step_ms(key):
        return 1e3 * sum(x[key] for x in w) / steps

    batch = int(next((a.split("=", 1)[1] for a in worker_args
                      if a.startswith("--batch=")), 128))
    queue = sampler.mean() if sampler else None
    phases = ["read_seconds", "pull_seconds", "compute_seconds", "push_seconds"]
    return {
        "servers": servers, "workers": workers, "loader": loader,
        "ok": int(proc.returncode == 0 and s["ok"]),
        "init_seconds": s["init_seconds"], "train_seconds": s["train_seconds"],
        "samples_per_second": s["samples_per_second"],
        "epoch_seconds": s["epoch_seconds"],
        "step_seconds": sum(per_step_ms(p) for p in phases) / 1e3,
        "pull_ms": per_step_ms("pull_seconds"),
        "push_ms": per_step_ms("push_seconds"),
        "compute_ms": per_step_ms("compute_seconds"),
        "read_ms": per_step_ms("read_seconds"),
        "cpu_utilisation": s["cpu_utilisation"],
        "emulated_compute_ms": s["emulated_compute_ms"],
        "batch": batch, "steps": max(x["steps"] for x in w) if w else 0,
        "param_bytes": 4 * (w[0].get("model_params", 0) if w else 0),
        "dataset_bytes": dataset_bytes(data),
        "server_link": links.get("server", ""),
        "worker_link": links.get("worker", ""),
        "storage_link": links.get("storage", ""),
        "optimizer": s.get("optimizer", ""),
        "consistency": s.get("consistency", "") or "async",
        "compression": s.get("compression", ""),
        # Pull responses and push requests, bytes per step (wire messages).
        "bytes_per_step": s.get("bytes_per_step", 0),
        "pull_bytes_per_step": sum(x.get("pull_bytes", 0) for x in w) / steps,
        "push_bytes_per_step": sum(x.get("push_bytes", 0) for x in w) / steps,
        "final_test_accuracy": s.get("final_test_accuracy", -1),
        "transfer_cv": transfer_cv(per_worker),
        # Packets the emulated links' queues dropped (each a retransmission).
        "dropped_packets": sum(x.get("dropped_packets", 0)
                               for x in s.get("link_stats", [])),
        "steady_window_seconds": steady_window(per_worker),
        "init_runs": f"{s['init_seconds']:.4f}",
        "push_queue_bytes": "" if queue is None else queue,
        "run_dir": run_dir,
    }


def repeat_init(row, repeats, data, links, worker_args):
    """Start-up is the point's shortest phase and its noisiest (tens of
    milliseconds of process start-up on shared cores with the parallel
    loader: one run of a point read 0.029 and another 0.061 s). Runs the
    point `repeats - 1` more times for 5 steps each (the first workers keep
    training while the last start, as in the full run) and makes the row's
    init_seconds the median of all its runs; init_runs lists them."""
    if repeats <= 1 or not row["ok"]:
        return row
    short = [a for a in worker_args if not a.startswith("--max_steps=")]
    short.append("--max_steps=5")
    inits = [row["init_seconds"]]
    for i in range(2, repeats + 1):
        again = run_point(f"{row['run_dir']}-init{i}", row["servers"],
                          row["workers"], row["loader"], data, links, short)
        if not again["ok"]:
            return dict(row, ok=0, run_dir=again["run_dir"])
        inits.append(again["init_seconds"])
    return dict(row, init_seconds=statistics.median(inits),
                init_runs=";".join(f"{x:.4f}" for x in inits))


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=FIELDS)
        out.writeheader()
        out.writerows(rows)


def read_rows(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in FIELDS:
            # Results written before a column existed lack it (or leave
            # it empty).
            if k in TEXT_FIELDS or k.endswith("_link") or not r.get(k):
                continue
            r[k] = float(r[k]) if "." in r[k] or "e" in r[k] else int(r[k])
    return rows


def rate_bytes_per_second(rate):
    """A tc rate ('200mbit', '1gbit', '800kbit') in bytes per second."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)?bit", rate)
    if not m:
        sys.exit(f"cannot read link rate {rate!r}")
    scale = {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return float(m.group(1)) * scale / 8


def add_run_flags(ap, out_default):
    """Flags every experiment shares: where, what data, which links."""
    ap.add_argument("--out", default=out_default, help="results directory")
    ap.add_argument("--data", default="",
                    help="data set directory (default: OUT/data, synthetic)")
    ap.add_argument("--samples", type=int, default=20000,
                    help="synthetic samples of 784 float features (~3.1 KB each)")
    ap.add_argument("--model", default="mlp:784-256-256-10")
    # Small batches keep the parallel loader's per-record HTTP reads (and
    # so the CPU) low; the parameter traffic per step does not depend on it.
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20,
                    help="steps per worker (--max_steps)")
    ap.add_argument("--emulate_compute_ms", type=float, default=100,
                    help="EMULATED compute per step (0: real forward/backward)")
    ap.add_argument("--optimizer", default="",
                    help="the workers' --optimizer (default: theirs, sgd)")
    # Low enough that 16 workers and 8 servers stay far below what two
    # cores can move through gRPC: the links are the bottleneck studied.
    ap.add_argument("--server_link", default="100mbit")
    ap.add_argument("--worker_link", default="500mbit")
    ap.add_argument("--storage_link", default="400mbit")
    ap.add_argument("--init_repeats", type=int, default=1,
                    help="runs per point whose median is its init_seconds")


def ensure_root():
    """The emulated cluster needs root: re-run this script with sudo."""
    if os.geteuid() != 0:
        os.execvp("sudo", ["sudo", "-E", sys.executable] + sys.argv)


def run_grid(points, args):
    """Runs (servers, workers, loader) points on the emulated cluster;
    writes OUT/results.csv after each run and returns the rows."""
    os.makedirs(args.out, exist_ok=True)
    data = args.data or os.path.join(args.out, "data")
    make_dataset(data, args.samples)
    links = {"server": args.server_link, "worker": args.worker_link,
             "storage": args.storage_link}
    worker_args = [f"--model={args.model}", f"--batch={args.batch}",
                   f"--max_steps={args.steps}", "--epochs=1000",
                   f"--emulate_compute_ms={args.emulate_compute_ms}",
                   "--progress_every=0"]
    if args.optimizer:
        worker_args.append(f"--optimizer={args.optimizer}")
    rows = []
    for i, (s, n, lo) in enumerate(points):
        run_dir = os.path.join(args.out, "runs", f"s{s}-n{n}-{lo}")
        # One server's runs of several workers also measure what a pull's
        # request queues behind (experiments/scale.py calibrates on that
        # column; the N = 1 run's CPU calibrates the wire's, unsampled).
        row = repeat_init(run_point(run_dir, s, n, lo, data, links,
                                    worker_args,
                                    sample_push_queue=s == 1 and n > 1),
                          args.init_repeats, data, links, worker_args)
        rows.append(row)
        write_rows(os.path.join(args.out, "results.csv"), rows)
        status = ("ok" if row["ok"]
                  else f"FAILED (see {row['run_dir']}.log)")
        print(f"[{i + 1}/{len(points)}] S={s} N={n} {lo}: {status} "
              f"init {row['init_seconds']:.2f} s ({row['init_runs']}), "
              f"{row['samples_per_second']:.0f} samples/s "
              f"(over {row['steady_window_seconds']:.1f} s), "
              f"CPU {100 * row['cpu_utilisation']:.0f}%", flush=True)
    return rows
