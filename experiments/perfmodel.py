#!/usr/bin/python3
"""The performance model of distributed training, after Hashemi et al. 2016
(arXiv 1612.00521), calibrated from small measurements and checked against
every point of a sweep.

Initial (ideal) model: initialisation costs the same at every N, and
throughput grows linearly with N (compute time per epoch ~ 1/N).

Updated model:
  init(N)   = t0 + N * D / B_storage   sequential loader (every worker reads
                                        the whole data set D over one shared
                                        storage link)
            = t0                       parallel loader (one batch first)
  step(N,S) between its two bounds
              compute + communication = t_c + 2 * max(M/(S*B_server), M/B_worker)
              server-side bound       = N * M / (S * B_server)
  samples/s = N * batch / step(N,S)
where M is the model's bytes (pulled and pushed once a step) and t_c the
per-step compute time. The links are capped in each direction, so pulls
(server egress) and pushes (server ingress) of different workers overlap
and the server-side bound is N*M/(S*B), not N*2M/(S*B) as for a half-duplex
link. Between the bounds, step(N,S) is the exact mean-value analysis of the
closed loop each worker runs: compute (a delay of t_c), then a pull and a
push, each queueing at the S server links with demand M/(S*B_server). Its
asymptotes are the two bounds above.

With --overlap=layer (wait-free backpropagation) a step is no longer
compute + communication: each layer's PushPull starts when backward writes
its gradient, and forward waits only at a layer whose answer is still on
its way. layer_step_seconds computes that step from the model's layer
profile (shardps-worker --bench=model: when each layer is read and its
gradient written) by a max-plus recurrence, each direction of the link
serving the calls in order (FIFO); predict_overlap calibrates it from a
run of the same job without overlap. shardps-sim --overlap=layer simulates
the same with the links shared max-min fairly, as TCP flows share them
(sim_layers gives it the profile).

Calibration uses only N=1, S=1 runs (one per loader): t0 and t_c and one
server's pull+push rate from the parallel run, the storage read rate from the
sequential run. Link rates of worker hosts are the nominal ones scaled by the
efficiency measured on the server link.

  perfmodel.py RESULTS.csv [--plots DIR]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402


def _find(rows, servers, workers, loader):
    for r in rows:
        if (r["servers"], r["workers"], r["loader"], r["ok"]) == (
                servers, workers, loader, 1):
            return r
    return None


def calibrate(rows):
    par = _find(rows, 1, 1, "parallel")
    seq = _find(rows, 1, 1, "sequential")
    if par is None or seq is None:
        sys.exit("calibration needs successful N=1, S=1 runs of both loaders")
    m = par["param_bytes"]
    comm = (par["pull_ms"] + par["push_ms"]) / 1e3
    b_server = 2 * m / comm
    eta = b_server / abkit.rate_bytes_per_second(par["server_link"])
    return {
        "t0": par["init_seconds"],
        "t_c": (par["compute_ms"] + par["read_ms"]) / 1e3,
        "B_storage": par["dataset_bytes"] / max(
            seq["init_seconds"] - par["init_seconds"], 1e-9),
        "B_server": b_server,
        "B_worker": eta * abkit.rate_bytes_per_second(par["worker_link"]),
        "link_efficiency": eta,
        "M": m,
        "D": par["dataset_bytes"],
        "batch": par["batch"],
        "baseline": {(r["servers"], r["loader"]): r for r in rows
                     if r["workers"] == 1 and r["ok"] == 1},
    }


def _mva_steps_per_second(n, think, demands):
    """Exact MVA of a closed network: n customers, a delay of `think` s,
    queueing stations with the given service demands (s). Throughput."""
    queues = [0.0] * len(demands)
    x = 0.0
    for k in range(1, n + 1):
        resid = [d * (1 + q) for d, q in zip(demands, queues)]
        x = k / (think + sum(resid))
        queues = [x * r for r in resid]
    return x


def predict(p, n, s, loader):
    """Updated model: (init seconds, samples per second)."""
    init = p["t0"] + (n * p["D"] / p["B_storage"] if loader == "sequential"
                      else 0.0)
    per_link = p["M"] / (s * p["B_server"])
    # A worker's own link, when slower than its share of the servers',
    # adds a delay that does not queue (no one else uses it).
    own = 2 * max(0.0, p["M"] / p["B_worker"] - per_link)
    x = _mva_steps_per_second(int(round(n)), p["t_c"] + own,
                              [per_link, per_link])
    return init, x * p["batch"]


def layer_step_seconds(profile, compute, pull_rate, push_rate, other=0.0,
                       chunk_bytes=1 << 20, steps=40):
    """A lone worker's step under --overlap=layer, seconds.

    `profile` is shardps-worker --bench=model's JSON: the mean step and,
    per parameterised layer in forward order, its parameters and when in the
    step it reads them (forward_at_ms) and writes its gradient
    (gradient_at_ms). Its times are scaled to `compute` seconds a step;
    `other` (reading the batch) comes first. Each layer's exchange starts
    when its gradient is written, as PushPull calls of `chunk_bytes`: each
    call's push waits for the pushes before it on the worker's uplink
    (`push_rate` bytes/s), its answer for its push and the answers before
    it on the downlink (`pull_rate`), so a layer's answers flow back while
    its later chunks are still pushed; the next step's forward reaches the
    layer no earlier than its last answer. The steady step of a
    deterministic (max-plus) recurrence over `steps` steps."""
    layers = profile["layers"]
    scale = compute / (profile["step_ms"] / 1e3)
    # Every event of a step in time order: (offset s, kind, layer index).
    events = sorted([(l["forward_at_ms"] * scale / 1e3, 0, i)
                     for i, l in enumerate(layers)] +
                    [(l["gradient_at_ms"] * scale / 1e3, 1, i)
                     for i, l in enumerate(layers)])
    ready = [0.0] * len(layers)  # when each layer's parameters are back
    up = down = 0.0  # when each direction of the link is free
    start, starts = 0.0, []
    for _ in range(steps):
        starts.append(start)
        t = start + other
        last = 0.0
        for offset, kind, i in events:
            t += offset - last
            last = offset
            if kind == 0:
                t = max(t, ready[i])
            else:
                left = 4 * layers[i]["params"]
                up = max(t, up)
                while left > 0:
                    chunk = min(left, chunk_bytes)
                    left -= chunk
                    up += chunk / push_rate
                    down = max(up, down) + chunk / pull_rate
                ready[i] = down
        start = t + compute - last
    tail = starts[steps // 2:]
    return (tail[-1] - tail[0]) / (len(tail) - 1)


def predict_overlap(none_row, profile):
    """Samples/s of --overlap=layer predicted from a run of the same job
    with --overlap=none: its compute, read, pull and push times per step
    (the pulls' and pushes' rates are its model bytes over them) and the
    model's layer profile. Communication costs no compute here: on
    loopback, where it is the same cores' work, this over-predicts."""
    r = none_row
    m = r["param_bytes"]
    step = layer_step_seconds(profile, r["compute_ms"] / 1e3,
                              m / (r["pull_ms"] / 1e3),
                              m / (r["push_ms"] / 1e3), r["read_ms"] / 1e3)
    return r["workers"] * r["batch"] / step


def sim_layers(profile):
    """shardps-sim's --layers for a layer profile: each layer's parameters
    and its offsets as fractions of the step."""
    step = profile["step_ms"]
    return ",".join(
        f"{l['params']}:{min(l['forward_at_ms'] / step, 1):.6f}:"
        f"{min(l['gradient_at_ms'] / step, 1):.6f}"
        for l in profile["layers"])


def predict_initial(p, n, s, loader):
    """Initial (ideal) model: the N=1 run of the same S and loader, with
    init unchanged and throughput times N."""
    one = p["baseline"].get((s, loader)) or p["baseline"].get((1, loader))
    return one["init_seconds"], n * one["samples_per_second"]


def _err(pred, meas):
    return abs(pred - meas) / meas if meas > 0 else float("nan")


def report(rows, p, out=sys.stdout):
    """Predicted vs measured for every point; returns the median absolute
    relative errors {(model, quantity): error}."""
    print(f"calibration: t0 {p['t0']:.3f} s, compute {1e3 * p['t_c']:.1f} ms/step, "
          f"storage {p['B_storage'] / 1e6:.1f} MB/s, one server "
          f"{p['B_server'] / 1e6:.1f} MB/s each way "
          f"(link efficiency {p['link_efficiency']:.2f}), "
          f"model {p['M'] / 1e6:.2f} MB, data set {p['D'] / 1e6:.1f} MB", file=out)
    print(f"{'S':>2} {'N':>3} {'loader':>10} | {'init':>6} {'upd':>6} {'err':>5} "
          f"{'ideal':>6} {'err':>5} | {'samples/s':>9} {'upd':>7} {'err':>5} "
          f"{'ideal':>7} {'err':>5} | cpu", file=out)
    errs = {("updated", "init"): [], ("updated", "rate"): [],
            ("initial", "init"): [], ("initial", "rate"): []}
    for r in sorted(rows, key=lambda r: (r["loader"], r["servers"], r["workers"])):
        if r["ok"] != 1:
            print(f"{r['servers']:>2} {r['workers']:>3} {r['loader']:>10} | failed",
                  file=out)
            continue
        n, s, lo = r["workers"], r["servers"], r["loader"]
        ui, ur = predict(p, n, s, lo)
        ii, ir = predict_initial(p, n, s, lo)
        e = {("updated", "init"): _err(ui, r["init_seconds"]),
             ("updated", "rate"): _err(ur, r["samples_per_second"]),
             ("initial", "init"): _err(ii, r["init_seconds"]),
             ("initial", "rate"): _err(ir, r["samples_per_second"])}
        for k, v in e.items():
            errs[k].append(v)
        print(f"{s:>2} {n:>3} {lo:>10} | {r['init_seconds']:6.2f} {ui:6.2f} "
              f"{100 * e['updated', 'init']:4.0f}% {ii:6.2f} "
              f"{100 * e['initial', 'init']:4.0f}% | "
              f"{r['samples_per_second']:9.0f} {ur:7.0f} "
              f"{100 * e['updated', 'rate']:4.0f}% {ir:7.0f} "
              f"{100 * e['initial', 'rate']:4.0f}% | "
              f"{100 * r['cpu_utilisation']:3.0f}%", file=out)
    medians = {k: statistics.median(v) for k, v in errs.items() if v}
    for model in ("updated", "initial"):
        both = errs[model, "init"] + errs[model, "rate"]
        if both:
            medians[model, "all"] = statistics.median(both)
        print(f"{model:>8} model: median absolute error init "
              f"{100 * medians.get((model, 'init'), float('nan')):.1f}%, "
              f"samples/s {100 * medians.get((model, 'rate'), float('nan')):.1f}%, "
              f"all {100 * medians.get((model, 'all'), float('nan')):.1f}%",
              file=out)
    return medians


def plot(rows, p, out_dir, title=""):
    """init time vs N per loader, and samples/s and epoch time vs N per S,
    with the updated (solid) and initial (dotted) model lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    ok = [r for r in rows if r["ok"] == 1]
    ns = sorted({r["workers"] for r in ok})
    grid = list(range(1, max(ns) + 1))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    paths = []

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for i, lo in enumerate(["sequential", "parallel"]):
        pts = sorted((r["workers"], r["init_seconds"]) for r in ok
                     if r["loader"] == lo)
        if not pts:
            continue
        c = colours[i]
        ax.plot(*zip(*pts), "o", color=c, label=f"{lo} (measured)")
        ax.plot(grid, [predict(p, n, 1, lo)[0] for n in grid], "-", color=c,
                label=f"{lo} (updated model)")
        ax.plot(grid, [predict_initial(p, n, 1, lo)[0] for n in grid], ":",
                color=c, label=f"{lo} (initial model)")
    ax.set_xlabel("workers N")
    ax.set_ylabel("initialisation time (s)")
    ax.set_title(f"Initialisation vs workers {title}".strip())
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    paths.append(os.path.join(out_dir, "init_vs_workers.png"))
    fig.tight_layout()
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    for quantity, label, fname in [
            ("samples_per_second", "aggregate samples/s", "throughput_vs_workers.png"),
            ("epoch_seconds", "time per epoch (s)", "epoch_vs_workers.png")]:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for i, s in enumerate(sorted({r["servers"] for r in ok})):
            c = colours[i % len(colours)]
            for lo, marker in [("parallel", "o"), ("sequential", "x")]:
                pts = sorted((r["workers"], r[quantity]) for r in ok
                             if r["servers"] == s and r["loader"] == lo)
                if pts:
                    ax.plot(*zip(*pts), marker, color=c,
                            label=f"S={s} {lo} (measured)")
            records = next(r["epoch_seconds"] * r["samples_per_second"]
                           for r in ok)

            def model(n, f):
                rate = f(p, n, s, "parallel")[1]
                return rate if quantity == "samples_per_second" else records / rate
            ax.plot(grid, [model(n, predict) for n in grid], "-", color=c,
                    label=f"S={s} updated model")
            ax.plot(grid, [model(n, predict_initial) for n in grid], ":",
                    color=c, linewidth=1)
        ax.set_xlabel("workers N")
        ax.set_ylabel(label)
        if quantity == "epoch_seconds":
            ax.set_yscale("log")
        ax.set_title(f"{label} vs workers (dotted: initial model) {title}".strip(),
                     fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        paths.append(os.path.join(out_dir, fname))
        fig.tight_layout()
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths


def check(rows, out_dir, title=""):
    """Calibrates, prints the comparison (also to OUT/model.txt) and draws
    the plots into out_dir."""
    p = calibrate(rows)
    with open(os.path.join(out_dir, "model.txt"), "w") as f:
        report(rows, p, f)
    report(rows, p)
    for path in plot(rows, p, out_dir, title):
        print("wrote", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="CSV written by sweep.py or demo.py")
    ap.add_argument("--plots", help="write the plots into this directory")
    args = ap.parse_args()
    rows = abkit.read_rows(args.results)
    p = calibrate(rows)
    report(rows, p)
    if args.plots:
        for path in plot(rows, p, args.plots):
            print("wrote", path)


if __name__ == "__main__":
    main()
