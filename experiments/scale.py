#!/usr/bin/python3
"""The scale simulation: calibrate shardps-sim (experiments/sim, SimGrid)
from measured runs, check it against every sweep point it was not
calibrated on, then predict what one machine cannot run.

  experiments/scale.py [--sweep experiments/results/sweep/results.csv]
                       [--bench BENCH.json] [--out experiments/results/scale]

Calibration (written to OUT/calibration.txt, nothing tuned per point),
from the sweep's N = 1 runs and S = 1 runs and two shardps-bench runs:
  - startup_*: the parallel loader's init (the median of the sweep's
    three runs of a point). A line through the N = 1 runs' init against
    S: its slope is the CPU per server connected, its value at S = 1 a
    lone start-up (lone_startup). That splits into waiting (round trips)
    and CPU on every core of the machine (a lone worker's start-up keeps
    both busy), and the launcher spends launch_cpu starting each worker:
    both fitted on the S = 1 column's init (fit_startup);
  - storage_efficiency and read_cpu_per_byte: a line through the S = 1
    column's sequential init beyond the parallel one against N (N >= 2):
    the data set over its slope against the nominal storage link; what a
    lone reader (N = 1) takes beyond that, per byte (sequential_reads);
  - call_cpu, client/server_cpu_per_byte: shardps-bench on loopback, a
    large and a one-call table (each side's cost; the two sides run on the
    two cores at once, so the slower side sets the rate);
  - wire_cpu_per_byte: the machine's CPU per step of the N = 1, S = 1
    parallel run beyond those costs, per byte moved (spent while the bytes
    flow);
  - pull/push_efficiency and pull/push_delay: a line through the N = 1
    runs' pull and push times against a shard's bytes (S = 1, 2, 4: the
    server link is the limit): its slope against the nominal server link,
    its intercept (fit_direction);
  - queued_push_bytes: how many push bytes of a worker a pull's request
    queues behind on a server's link, measured in the S = 1 column's runs
    (push_queue);
  - transfer_cv: how much a shard's transfer varies once workers share
    the links, fitted on the S = 1 column (fit_contention).
Validation: every sweep point with N >= 2 and S >= 2, the simulator run
with the sweep's own settings (its steps, the launcher's steady window),
beside experiments/perfmodel.py on the same points. Prediction: N up to
1024 and S up to 128 for the demo's settings and for a data-centre
setting.
"""

import argparse
import concurrent.futures
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402
import perfmodel  # noqa: E402

SIM = os.path.join(abkit.BIN, "shardps-sim")
# abkit's synthetic data set: --samples 20000, a tenth held out for test.
SWEEP_TRAIN_RECORDS = 18000
CORES = os.cpu_count() or 2
# Of the simulated transfers' variation and the workers' starting
# phases: ten, since where a few workers start decides how much they meet.
SEEDS = tuple(range(1, 11))

# The data-centre setting: ResNet-50 (25.6M float32 parameters, ~102 MB)
# trained on V100s, 367 images/s each in FP32 (NVIDIA DeepLearningExamples,
# PyTorch ResNet50 v1.5, DGX-1 16 GB, 1 GPU): a batch of 64 is 174 ms of
# compute. ImageNet's 1.28M training images, ~110 KB each. 10 Gbit/s links
# everywhere, 25 Gbit/s storage, 50 us one way, servers of 16 cores, 4
# cores of a worker's host for its client work (a DGX-1 has 40 for its 8
# GPUs). The CPU costs and the transfers' delays are this machine's, as
# calibrated: they include the emulated network's kernel work, so they are
# pessimistic for a real NIC; the links' efficiencies are the emulated
# links', at most 1 (the emulated ingress shaper passes pushes faster than
# its nominal rate; a real link does not).
DATACENTRE = {
    "param_bytes": 25.6e6 * 4, "dataset_bytes": 1.28e6 * 110e3,
    "sample_bytes": 110e3, "batch": 64, "compute_ms": 1e3 * 64 / 367,
    "server_link": "10gbit", "worker_link": "10gbit",
    "storage_link": "25gbit", "latency_ms": 0.05, "shared_cores": 0,
    "server_cores": 16, "worker_cores": 4,
}


def find(rows, servers, workers, loader):
    for r in rows:
        if (r["servers"], r["workers"], r["loader"], r["ok"]) == (
                servers, workers, loader, 1):
            return r
    sys.exit(f"scale: the sweep has no successful S={servers} N={workers} "
             f"{loader} run (run `make sweep` first)")


def bench(params):
    """shardps-bench on loopback, one server, one client: its JSON."""
    out = subprocess.run(
        [abkit.binary("shardps-bench"), "--spawn_servers=1",
         f"--params={params}", "--seconds=2", "--json"],
        capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def fit_direction(rows, key, serial_per_byte, call_cpu):
    """One direction's ("pull_ms" or "push_ms") efficiency and delay: a line
    through the N = 1 runs' transfer times against a shard's bytes, over
    the S whose server links are the limit (S links slower than the
    worker's), both loaders. Its slope, less the CPU per byte before and
    after the bytes' way, is the server link's goodput; its intercept, less
    a call's CPU at each end, what a transfer costs beyond bytes and CPU."""
    runs = [r for r in rows if r["ok"] == 1 and r["workers"] == 1 and
            r["servers"] * abkit.rate_bytes_per_second(r["server_link"]) <=
            abkit.rate_bytes_per_second(r["worker_link"])]
    if len({r["servers"] for r in runs}) < 2:
        sys.exit("scale: the sweep needs N = 1 runs at two or more S whose "
                 f"server links are the limit to calibrate {key} (run `make "
                 "sweep` first)")
    line = statistics.linear_regression(
        [r["param_bytes"] / r["servers"] for r in runs],
        [r[key] / 1e3 for r in runs])
    rate = abkit.rate_bytes_per_second(runs[0]["server_link"])
    return (1 / (rate * (line.slope - serial_per_byte)),
            max(0.0, line.intercept - 2 * call_cpu))


def lone_startup(rows):
    """A line through the N = 1 parallel runs' init against S: its slope
    (the CPU each server connected adds) and its value at S = 1 (a lone
    worker's start-up)."""
    lone = [r for r in rows if r["ok"] == 1 and r["workers"] == 1 and
            r["loader"] == "parallel"]
    if len({r["servers"] for r in lone}) < 2:
        sys.exit("scale: the sweep needs parallel runs at N = 1 for two or "
                 "more S to calibrate the start-up (run `make sweep` first)")
    line = statistics.linear_regression([r["servers"] for r in lone],
                                        [r["init_seconds"] for r in lone])
    return max(0.0, line.slope), line.intercept + line.slope


def startup(lone_s1, per_server, wait, launch_cpu):
    """The start-up keys: of a lone start-up at S = 1, `wait` seconds are
    round trips, the rest CPU on each of the machine's CORES."""
    return {"startup_wait": wait,
            "startup_cpu": max(0.0, lone_s1 - wait - per_server),
            "startup_cpu_per_server": per_server,
            "startup_threads": CORES, "launch_cpu": launch_cpu}


def fit_grid(points, cal, sources, out, rows, cols, keys, score, corner,
             seeds=SEEDS, steps=None):
    """Simulates `points` (`steps` steps each, or the sweep's) with `cal`
    updated by keys(row, col) for every (label, value) of `rows` x `cols`;
    score(sims) gives a cell's error and its text. Returns the keys of the
    smallest error and the grid as a markdown table (`corner` names the
    rows)."""
    path = os.path.join(out, "calibration-fit.txt")
    lines = [f"| {corner} | " + " | ".join(c for c, _ in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    best = None
    for row_label, row in rows:
        cells = []
        for _, col in cols:
            cell_keys = keys(row, col)
            write_calibration(path, dict(cal, **cell_keys), sources)
            runs = [sweep_point(r, path) for r in points]
            if steps:
                runs = [dict(run, steps=steps) for run in runs]
            sims = simulate_seeds(runs, seeds)
            error, text = score(sims)
            cells.append(text)
            if best is None or error < best[0]:
                best = (error, cell_keys)
        lines.append(f"| {row_label} | " + " | ".join(cells) + " |")
    os.remove(path)
    return best[1], lines


# A lone start-up's share that is waiting, and the launcher's CPU per
# worker started, seconds.
WAIT_SHARES = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
LAUNCH_CPUS = [0, 0.001, 0.002, 0.003, 0.004, 0.006, 0.008, 0.012]


def fit_startup(rows, cal, sources, out):
    """startup_wait and launch_cpu: how a lone start-up splits into round
    trips and CPU, and what the launcher spends starting each worker on the
    shared machine. N workers starting at once would take wait + N x CPU;
    the launcher's starts spread them out. Fitted on the S = 1 column's
    parallel init (N = 2 .. 16): the pair of WAIT_SHARES x LAUNCH_CPUS with
    the smallest mean relative error there. Returns the start-up keys and
    the fit's table."""
    points = [r for r in rows if r["ok"] == 1 and r["servers"] == 1 and
              r["workers"] > 1 and r["loader"] == "parallel"]
    if not points:
        sys.exit("scale: the sweep has no successful parallel S=1, N>1 run "
                 "to fit the start-up on (run `make sweep` first)")
    per_server, lone_s1 = lone_startup(rows)

    def score(sims):
        e = statistics.mean(err(sim["init_seconds"], r["init_seconds"])
                            for r, sim in zip(points, sims))
        return e, f"{100 * e:.1f}%"
    return fit_grid(
        points, cal, sources, out,
        [(f"{1e3 * launch:g}", launch) for launch in LAUNCH_CPUS],
        [(f"wait {share:.0%}", share) for share in WAIT_SHARES],
        lambda launch, share: startup(lone_s1, per_server, share * lone_s1,
                                      launch),
        score, "launch_cpu ms", seeds=(1,), steps=1)


def sequential_reads(rows):
    """The storage link's goodput and the sequential loader's CPU per byte
    read. The S = 1 column's sequential init beyond the parallel one at the
    same N is the data set's reading: a line through it against N (N >=
    2, readers sharing the link and filling each other's gaps) has the
    data set over the goodput as its slope; what a lone reader (N = 1)
    takes beyond the data set at that goodput is its checking of each
    block, during which its link idles."""
    extra = {}
    for r in rows:
        if r["ok"] == 1 and r["servers"] == 1:
            extra.setdefault(r["workers"], {})[r["loader"]] = r["init_seconds"]
    points = [(n, e["sequential"] - e["parallel"]) for n, e in extra.items()
              if n > 1 and len(e) == 2]
    if len(points) < 2 or len(extra.get(1, {})) < 2:
        sys.exit("scale: the sweep needs both loaders' S = 1 runs at N = 1 "
                 "and two or more N > 1 to calibrate the storage reads (run "
                 "`make sweep` first)")
    line = statistics.linear_regression(*zip(*points))
    data = find(rows, 1, 1, "sequential")["dataset_bytes"]
    goodput = data / line.slope
    lone = extra[1]["sequential"] - extra[1]["parallel"]
    return goodput, max(0.0, (lone - data / goodput) / data)


def calibrate(rows, benches):
    par = find(rows, 1, 1, "parallel")
    big, small = benches
    # Each side's CPU per byte: the slower side sets the loopback rate.
    per_byte = 1 / (1e6 * statistics.mean(
        [big["push_MBps"], big["pull_MBps"]]))
    call_bytes = small["params"] * 4
    calls_per_s = 1e6 * small["push_MBps"] / call_bytes
    call_cpu = max(0.0, 1 / calls_per_s - call_bytes * per_byte)
    m = par["param_bytes"]
    calls = 2 * max(1, math.ceil(m / (1 << 20)))
    # The machine's CPU per step of that run beyond the calls and both
    # ends' own work (the emulated network's packet work, nginx, the
    # launcher), per byte moved.
    machine = par["cpu_utilisation"] * CORES * par["step_seconds"]
    wire = max(0.0, (machine - calls * 2 * call_cpu - 2 * m * 2 * per_byte) /
               (2 * m))
    pull_efficiency, pull_delay = fit_direction(rows, "pull_ms",
                                                2 * per_byte, call_cpu)
    push_efficiency, push_delay = fit_direction(rows, "push_ms",
                                                2 * per_byte, call_cpu)
    storage, read_cpu = sequential_reads(rows)
    per_server, lone_s1 = lone_startup(rows)
    return {
        # All CPU, started at once, until fit_startup splits it.
        **startup(lone_s1, per_server, wait=0, launch_cpu=0),
        "storage_efficiency": storage / abkit.rate_bytes_per_second(
            par["storage_link"]),
        "read_cpu_per_byte": read_cpu,
        "pull_efficiency": pull_efficiency,
        "push_efficiency": push_efficiency,
        "pull_delay": pull_delay,
        "push_delay": push_delay,
        "call_cpu": call_cpu,
        "client_cpu_per_byte": per_byte,
        "server_cpu_per_byte": per_byte,
        "wire_cpu_per_byte": wire,
    }


def write_calibration(path, cal, sources):
    with open(path, "w") as f:
        f.write("# shardps-sim calibration, written by experiments/scale.py "
                "from:\n")
        for s in sources:
            f.write(f"#   {s}\n")
        for k, v in cal.items():
            f.write(f"{k} {v:.9g}\n")


def sim_args(point):
    return [SIM] + [f"--{k}={v}" for k, v in point.items()]


def simulate(point):
    out = subprocess.run(sim_args(point), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"scale: {' '.join(sim_args(point))}: {out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def simulate_all(points):
    with concurrent.futures.ThreadPoolExecutor(CORES) as pool:
        return list(pool.map(simulate, points))


def simulate_seeds(points, seeds=SEEDS):
    """Each point's init, samples/s, pull and push times, averaged over
    `seeds` (the transfers' variation is random)."""
    runs = simulate_all([dict(p, seed=seed) for p in points
                         for seed in seeds])
    out = []
    for i in range(len(points)):
        mine = runs[i * len(seeds):(i + 1) * len(seeds)]
        out.append({k: statistics.mean(r[k] for r in mine)
                    for k in ("init_seconds", "samples_per_second",
                              "pull_ms", "push_ms")})
    return out


def sweep_point(r, calibration):
    """The simulator's flags for a sweep row: the run's own settings."""
    return {
        "calibration": calibration, "workers": r["workers"],
        "servers": r["servers"], "loader": r["loader"],
        "consistency": r.get("consistency") or "async",
        "compression": r.get("compression") or "none",
        "param_bytes": r["param_bytes"], "dataset_bytes": r["dataset_bytes"],
        "sample_bytes": r["dataset_bytes"] / SWEEP_TRAIN_RECORDS,
        "batch": r["batch"],
        "steps": r.get("steps") or 20, "compute_ms": r["emulated_compute_ms"],
        "server_link": r["server_link"], "worker_link": r["worker_link"],
        "storage_link": r["storage_link"], "shared_cores": CORES,
    }


def err(pred, meas):
    return abs(pred - meas) / meas if meas > 0 else float("nan")


# How much a transfer varies once it shares a link (alone it never does,
# so 0 would leave workers that meet in step by the smallest difference).
CVS = [0.1, 0.2, 0.3, 0.4]
FIT_KEYS = ("samples_per_second", "pull_ms", "push_ms")


def push_queue(rows):
    """queued_push_bytes: the mean over the sweep's S = 1, N >= 2 runs of
    push_queue_bytes, the push bytes a worker had in flight to its server
    while it pushed (abkit.PushQueueSampler: ss every 50 ms in worker 0's
    namespace; the links' shapers are the only queues). Returns it and
    each run's figure."""
    runs = [r for r in rows if r["ok"] == 1 and r["servers"] == 1 and
            r["workers"] > 1 and
            isinstance(r.get("push_queue_bytes"), (int, float))]
    if not runs:
        sys.exit("scale: the sweep's S = 1 runs have no push_queue_bytes "
                 "(a sweep from before it was measured: run `make sweep`)")
    return (statistics.mean(r["push_queue_bytes"] for r in runs),
            [(r["workers"], r["loader"], r["push_queue_bytes"])
             for r in runs])


def fit_contention(rows, cal, sources, out):
    """transfer_cv: how much one transfer's time varies once others share
    its links (with cal's measured queued_push_bytes). A worker alone
    never varies so, so it is fitted on the S = 1 column (one link shared
    by N = 2 .. 16 workers, both loaders): of CVS, the one with the
    smallest mean relative error of samples/s, pull and push times there.
    The other servers' columns are never seen. Returns the key and the
    fit's table."""
    points = [r for r in rows if r["ok"] == 1 and r["servers"] == 1 and
              r["workers"] > 1]
    if not points:
        sys.exit("scale: the sweep has no successful S=1, N>1 run to fit "
                 "the contention on (run `make sweep` first)")

    def score(sims):
        e = {k: statistics.mean(err(sim[k], r[k])
                                for r, sim in zip(points, sims))
             for k in FIT_KEYS}
        mean = statistics.mean(e.values())
        return mean, (f"{100 * mean:.1f}% (samples/s "
                      f"{100 * e['samples_per_second']:.0f}%, pull "
                      f"{100 * e['pull_ms']:.0f}%, push "
                      f"{100 * e['push_ms']:.0f}%)")
    return fit_grid(
        points, cal, sources, out,
        [(f"{cal['queued_push_bytes']:.0f} (measured)", None)],
        [(f"transfer_cv {cv:.1f}", cv) for cv in CVS],
        lambda _, cv: {"transfer_cv": cv}, score, "queued_push_bytes")


def unsteady(r):
    """Whether a run's steady samples/s covers under a quarter of its
    training (some workers ran most of their steps before others began:
    the sequential loader's readers finish seconds apart)."""
    window = r.get("steady_window_seconds")
    return isinstance(window, float) and window < 0.25 * r["train_seconds"]


def validate(rows, calibration, out):
    """Every sweep point the calibration did not use (N >= 2, S >= 2):
    simulator and perfmodel against the measurement. Returns the table's
    lines and the errors."""
    points = [r for r in rows if r["ok"] == 1 and r["servers"] > 1 and
              r["workers"] > 1]
    sims = simulate_seeds([sweep_point(r, calibration) for r in points])
    model = perfmodel.calibrate(rows)
    lines = ["| S | N | loader | init meas | sim | err | model | err | "
             "samples/s meas | sim | err | model | err |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errors = {("sim", "init"): [], ("sim", "rate"): [],
              ("model", "init"): [], ("model", "rate"): []}
    steady_rates = {"sim": [], "model": []}
    for r, sim in zip(points, sims):
        m_init, m_rate = perfmodel.predict(model, r["workers"], r["servers"],
                                           r["loader"])
        e = {("sim", "init"): err(sim["init_seconds"], r["init_seconds"]),
             ("sim", "rate"): err(sim["samples_per_second"],
                                  r["samples_per_second"]),
             ("model", "init"): err(m_init, r["init_seconds"]),
             ("model", "rate"): err(m_rate, r["samples_per_second"])}
        for k, v in e.items():
            errors[k].append(v)
        if not unsteady(r):
            for who in steady_rates:
                steady_rates[who].append(e[who, "rate"])
        lines.append(
            f"| {r['servers']} | {r['workers']} | {r['loader']} | "
            f"{r['init_seconds']:.2f} | {sim['init_seconds']:.2f} | "
            f"{100 * e['sim', 'init']:.0f}% | {m_init:.2f} | "
            f"{100 * e['model', 'init']:.0f}% | "
            f"{r['samples_per_second']:.0f}{'†' if unsteady(r) else ''} | "
            f"{sim['samples_per_second']:.0f} | "
            f"{100 * e['sim', 'rate']:.0f}% | {m_rate:.0f} | "
            f"{100 * e['model', 'rate']:.0f}% |")
    lines += ["", "† the launcher's steady window covers under a quarter of "
              "that run's training (its workers began too far apart)", ""]
    for who in ("sim", "model"):
        for q in ("init", "rate"):
            v = errors[who, q]
            lines.append(
                f"- {'shardps-sim' if who == 'sim' else 'perfmodel.py'} "
                f"{'init' if q == 'init' else 'samples/s'}: median absolute "
                f"error {100 * statistics.median(v):.1f}%, max "
                f"{100 * max(v):.1f}% ({len(v)} points)")
    for who in ("sim", "model"):
        v = steady_rates[who]
        if len(v) < len(errors[who, "rate"]):
            lines.append(
                f"- {'shardps-sim' if who == 'sim' else 'perfmodel.py'} "
                f"samples/s without †: median absolute error "
                f"{100 * statistics.median(v):.1f}%, max {100 * max(v):.1f}% "
                f"({len(v)} points)")
    return lines, errors


def steady(point):
    """Simulates `point` with more steps until its rate changes < 2%
    between the window's halves: 40 then 80 steps; from N = 512 on, where
    a step of all the workers costs ~0.3-1 s here, 20, 40 then 60.
    r["steady"] says whether it got there."""
    large = point["workers"] >= 512
    most = 60 if large else 80
    steps = 20 if large else 40
    while True:
        r = simulate(dict(point, steps=steps))
        halves = (r["first_half"], r["second_half"])
        r["steady"] = abs(halves[0] - halves[1]) < 0.02 * max(halves)
        if r["steady"] or steps >= most:
            return r
        steps = steps + 20 if large else 2 * steps


# Up to this N a prediction is the median of three seeds: where a few
# workers start decides whether they lock into step behind each other's
# pushes (the demo's S = 1, N = 2 gave 89-115 samples/s over five seeds).
FEW_WORKERS = 16


def steady_all(points):
    """steady() of every point (of FEW_WORKERS or fewer: the run of the
    median samples/s of seeds 1-3), the largest N first (a pool that ends
    on one N = 1024 point leaves the other cores idle)."""
    runs = [(i, dict(p, seed=seed)) for i, p in enumerate(points)
            for seed in (SEEDS[:3] if p["workers"] <= FEW_WORKERS else
                         SEEDS[:1])]
    runs.sort(key=lambda run: -run[1]["workers"])
    with concurrent.futures.ThreadPoolExecutor(CORES) as pool:
        futures = [(i, pool.submit(steady, p)) for i, p in runs]
    out = [[] for _ in points]
    for i, future in futures:
        out[i].append(future.result())
    return [sorted(rs, key=lambda r: r["samples_per_second"])[len(rs) // 2]
            for rs in out]


NS = [2 ** i for i in range(11)]  # 1 .. 1024 workers
SS = [2 ** i for i in range(8)]   # 1 .. 128 servers


def demo_setting(rows):
    """The sweep's own job and links, on hosts with CPUs of their own."""
    r = find(rows, 1, 1, "parallel")
    return {
        "param_bytes": r["param_bytes"], "dataset_bytes": r["dataset_bytes"],
        "sample_bytes": r["dataset_bytes"] / SWEEP_TRAIN_RECORDS,
        "batch": r["batch"], "compute_ms": r["emulated_compute_ms"],
        "server_link": r["server_link"], "worker_link": r["worker_link"],
        "storage_link": r["storage_link"], "shared_cores": 0,
        "server_cores": CORES, "worker_cores": CORES,
    }


def predict(setting, calibration):
    """samples/s for every N x S (parallel loader) and init for every N
    and loader; {(n, s): result}, {(n, loader): init seconds}."""
    base = dict(setting, calibration=calibration)
    grid = [(n, s) for s in SS for n in NS]
    rates = steady_all([dict(base, workers=n, servers=s, loader="parallel")
                        for n, s in grid])
    inits = simulate_all([dict(base, workers=n, servers=1, loader=lo,
                               steps=2)
                          for lo in ("sequential", "parallel") for n in NS])
    init = {}
    for i, lo in enumerate(("sequential", "parallel")):
        for j, n in enumerate(NS):
            init[n, lo] = inits[i * len(NS) + j]["init_seconds"]
    return dict(zip(grid, rates)), init


def servers_needed(rates):
    """For each N, the smallest S whose N workers keep >= 90% of N times
    one worker's samples/s with that S (None: no S up to 128 does)."""
    need = {}
    for n in NS:
        need[n] = next((s for s in SS if rates[n, s]["samples_per_second"] >=
                        0.9 * n * rates[1, s]["samples_per_second"]), None)
    return need


def plot(name, rates, init, need, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for s in SS:
        axes[0].plot(NS, [rates[n, s]["samples_per_second"] for n in NS],
                     marker="o", label=f"S={s}")
    axes[0].plot(NS, [n * rates[1, 1]["samples_per_second"] for n in NS],
                 "k--", label="linear")
    axes[0].set(xscale="log", yscale="log", xlabel="workers N",
                ylabel="samples/s", title=f"{name}: throughput")
    axes[0].legend(fontsize=7)
    xs = [n for n in NS if need[n] is not None]
    axes[1].plot(xs, [need[n] for n in xs], marker="o")
    axes[1].set(xscale="log", yscale="log", xlabel="workers N",
                ylabel="servers S", title="smallest S for >= 90% of linear")
    for lo in ("sequential", "parallel"):
        axes[2].plot(NS, [init[n, lo] for n in NS], marker="o", label=lo)
    axes[2].set(xscale="log", yscale="log", xlabel="workers N",
                ylabel="init seconds", title="initialization")
    axes[2].legend()
    fig.tight_layout()
    path = os.path.join(out, f"{name}.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def one_host_check(setting, calibration, workers=64, servers=16):
    """The predictions simulate the S servers as one host (fast at N =
    1024), which leaves out that each shard's transfer varies on its own
    and a pull or push waits for the slowest: the same point both ways,
    mean of three seeds (every shard is ~16 s a run here), says how much
    that matters."""
    point = dict(setting, calibration=calibration, workers=workers,
                 servers=servers, loader="parallel", steps=40)
    one, every = simulate_seeds([point, dict(point, every_shard="true")],
                                seeds=SEEDS[:3])
    a, b = one["samples_per_second"], every["samples_per_second"]
    return [f"Servers as one host against every shard simulated, N = "
            f"{workers}, S = {servers}: {a:.0f} against {b:.0f} samples/s "
            f"({100 * (a - b) / b:+.0f}%: the one-host figures leave out "
            "waiting for the slowest shard).", ""]


def prediction_lines(name, rates, init, need):
    lines = [f"### {name}", "",
             "| N | " + " | ".join(f"S={s}" for s in SS) +
             " | smallest S (>= 90%) | init sequential s | init parallel s |",
             "|---" * (len(SS) + 4) + "|"]
    for n in NS:
        cells = " | ".join(
            f"{rates[n, s]['samples_per_second']:.0f}"
            f"{'' if rates[n, s]['steady'] else '*'}" for s in SS)
        lines.append(f"| {n} | {cells} | {need[n] or '> 128'} | "
                     f"{init[n, 'sequential']:.1f} | "
                     f"{init[n, 'parallel']:.2f} |")
    return lines + ["", "(* not steady: halves differ by >= 2% at the "
                    "most steps simulated)", ""]


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweep", default=os.path.join(
        abkit.ROOT, "experiments", "results", "sweep", "results.csv"))
    ap.add_argument("--out", default=os.path.join(
        abkit.ROOT, "experiments", "results", "scale"))
    ap.add_argument("--validate_only", action="store_true")
    args = ap.parse_args()
    if not os.access(SIM, os.X_OK):
        sys.exit(f"scale: {SIM} is missing (libsimgrid-dev, then make build)")
    start = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    if not os.path.exists(args.sweep):
        sys.exit(f"scale: {args.sweep} is missing (run `make sweep` first)")
    rows = abkit.read_rows(args.sweep)
    benches = [bench(1000000), bench(4096)]
    cal = calibrate(rows, benches)
    sources = [
        f"{os.path.relpath(args.sweep, abkit.ROOT)} (N = 1, S = 1, both "
        "loaders; pull/push_efficiency and delay, startup_cpu_per_server: "
        "the N = 1 row; storage_efficiency, read_cpu_per_byte: both "
        "loaders' S = 1 column; startup_wait, launch_cpu, transfer_cv: fitted on "
        "the S = 1 column; queued_push_bytes: the S = 1 column's "
        "push_queue_bytes)",
        "shardps-bench --spawn_servers=1 --params=1000000: "
        f"push {benches[0]['push_MBps']} pull {benches[0]['pull_MBps']} MB/s",
        "shardps-bench --spawn_servers=1 --params=4096: "
        f"push {benches[1]['push_MBps']} MB/s"]
    cal["queued_push_bytes"], queues = push_queue(rows)
    keys, fit = fit_contention(rows, cal, sources, args.out)
    cal.update(keys)
    keys, startup_fit = fit_startup(rows, cal, sources, args.out)
    cal.update(keys)
    cal_path = os.path.join(args.out, "calibration.txt")
    write_calibration(cal_path, cal, sources)
    lines, _ = validate(rows, cal_path, args.out)
    report = ["# Scale simulation", "",
              f"Calibration: `{os.path.relpath(cal_path, abkit.ROOT)}`; "
              f"sweep: `{os.path.relpath(args.sweep, abkit.ROOT)}`.", "",
              "## Calibration of the contention (the S = 1 column: mean "
              "relative error of samples/s, pull and push times, simulated "
              "with seeds "
              f"{', '.join(map(str, SEEDS))})", ""]
    measured = ", ".join(f"N = {n} {lo} {b / 1e3:.0f} KB"
                         for n, lo, b in queues)
    report += fit + ["", f"Chosen: transfer_cv {cal['transfer_cv']:.1f}; "
                     f"queued_push_bytes {cal['queued_push_bytes']:.0f}, "
                     f"the mean of the S = 1 runs' push_queue_bytes "
                     f"({measured}).", "",
                     "## Calibration of the start-up (the S = 1 column: "
                     "mean relative error of the parallel loader's init)",
                     ""]
    report += startup_fit + ["", f"Chosen: startup_wait "
                             f"{1e3 * cal['startup_wait']:.1f} ms, "
                             f"launch_cpu {1e3 * cal['launch_cpu']:g} ms.",
                             "", "## Validation (N >= 2 and S >= 2: points the "
                     "calibration did not use)", ""]
    report += lines + [""]
    if not args.validate_only:
        report += ["## Predictions (parallel loader; samples/s)", ""]
        real_links = os.path.join(args.out, "calibration-datacentre.txt")
        write_calibration(real_links, dict(
            cal, pull_efficiency=min(1, cal["pull_efficiency"]),
            push_efficiency=min(1, cal["push_efficiency"])), sources)
        for name, setting, path in (
                ("demo", demo_setting(rows), cal_path),
                ("datacentre", DATACENTRE, real_links)):
            rates, init = predict(setting, path)
            need = servers_needed(rates)
            plot(name, rates, init, need, args.out)
            report += prediction_lines(name, rates, init, need)
            report += one_host_check(setting, path)
            report += [f"![{name}]({name}.png)", ""]
    report.append(f"(all of it took {time.monotonic() - start:.0f} s here)")
    text = "\n".join(report) + "\n"
    with open(os.path.join(args.out, "scale.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
