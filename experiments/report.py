#!/usr/bin/python3
"""Where one run's time went: turns a shardps-launch run directory into a
phase breakdown per worker and per server, the way the paper broke CNTK's
epochs down into initialization and computation.

    experiments/report.py RUN_DIR [--out DIR]

Reads RUN_DIR/summary.json and writes DIR/report.md (the table, also
printed) and DIR/report.png (stacked bars; DIR defaults to RUN_DIR).

Workers: initialization (process start-up; opening the data and creating
the table; the first batch, which for the sequential loader is the whole
data set's read), then per step waiting for data, pull, compute and push,
and what else the loop did. Servers: seconds spent answering pulls (a
pull's wait for other workers under sync or ssp included), pushes and
other calls, summed over calls (they may overlap), and idle, the rest of
the server's uptime, plus the bytes it received and sent (the handlers'
seconds exclude moving the bytes over the network). Python 3 standard library plus Debian's
python3-matplotlib."""

import argparse
import json
import os
import sys

WORKER_PHASES = ["init: start-up", "init: data + table", "init: first batch",
                 "wait for data", "pull", "compute", "push", "other"]
SERVER_PHASES = ["answer pulls", "answer pushes", "other calls", "idle"]
# Time doing nothing in grey; the rest in matplotlib's default cycle.
COLOURS = {"other": "#9e9e9e", "idle": "#d9d9d9"}


def worker_rows(summary):
    rows = []
    for w in summary.get("per_worker", []):
        get = lambda key: float(w.get(key, 0.0))
        steps = (get("read_seconds") + get("pull_seconds") +
                 get("compute_seconds") + get("push_seconds"))
        values = {
            "init: start-up": get("init_startup_seconds"),
            "init: data + table":
                get("init_data_seconds") + get("init_table_seconds"),
            "init: first batch": get("init_first_batch_seconds"),
            "wait for data": get("read_seconds"),
            "pull": get("pull_seconds"),
            "compute": get("compute_seconds"),
            "push": get("push_seconds"),
            # The loop's own work: metrics lines, checkpoints, evaluation.
            "other": max(0.0, get("train_seconds") - steps),
        }
        rows.append((f"worker-{int(w.get('rank', 0))}", values))
    return rows


def server_rows(summary):
    rows = []
    for s in summary.get("per_server", []):
        seconds = {m.get("method", ""): float(m.get("seconds", 0.0))
                   for m in s.get("methods", [])}
        pulls = seconds.get("Pull", 0.0)
        pushes = seconds.get("Push", 0.0)
        other = seconds.get("CreateTable", 0.0) + seconds.get("Stats", 0.0)
        busy = pulls + pushes + other
        values = {
            "answer pulls": pulls,
            "answer pushes": pushes,
            "other calls": other,
            "idle": max(0.0, float(s.get("uptime_seconds", 0.0)) - busy),
        }
        mib = 1 << 20
        traffic = {
            "MiB received": sum(float(m.get("bytes_received", 0))
                                for m in s.get("methods", [])) / mib,
            "MiB sent": sum(float(m.get("bytes_sent", 0))
                            for m in s.get("methods", [])) / mib,
        }
        rows.append((f"server-{int(s.get('index', 0))}", values, traffic))
    return rows


def table(title, phases, rows, extra=()):
    """`rows` are (name, seconds per phase[, extra columns])."""
    lines = [f"### {title}", "",
             "| process | " + " | ".join(phases) + " | total |" +
             "".join(f" {e} |" for e in extra),
             "|---" * (len(phases) + 2 + len(extra)) + "|"]
    for name, values, *more in rows:
        cells = [f"{values[p]:.3f}" for p in phases]
        total = sum(values[p] for p in phases)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {total:.3f} |" +
                     "".join(f" {more[0][e]:.1f} |" for e in extra))
    return "\n".join(lines) + "\n"


def plot(path, title, sections):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = [(t, p, r) for t, p, r in sections if r]
    fig, axes = plt.subplots(
        len(present), 1, squeeze=False,
        figsize=(9, 1.2 + 1.2 * len(present) +
                 0.45 * sum(len(r) for _, _, r in present)),
        gridspec_kw={"height_ratios": [len(r) + 1 for _, _, r in present]})
    for ax, (section, phases, rows) in zip(axes[:, 0], present):
        names = [row[0] for row in rows]
        left = [0.0] * len(rows)
        for phase in phases:
            widths = [row[1][phase] for row in rows]
            ax.barh(names, widths, left=left, label=phase,
                    color=COLOURS.get(phase))
            left = [a + b for a, b in zip(left, widths)]
        ax.invert_yaxis()
        ax.set_xlabel("seconds")
        ax.set_title(section, fontsize=10)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--out", help="where report.md and report.png go "
                        "(default: RUN_DIR)")
    args = parser.parse_args()
    path = os.path.join(args.run_dir, "summary.json")
    try:
        with open(path) as f:
            summary = json.load(f)
    except OSError as e:
        sys.exit(f"report: cannot read {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        sys.exit(f"report: {path} is not JSON: {e}")
    workers = worker_rows(summary)
    if not workers:
        sys.exit(f"report: {path} has no per-worker figures "
                 "(did the run fail before training?)")
    servers = server_rows(summary)
    emulated = float(summary.get("emulated_compute_ms", 0.0))
    title = (f"{summary.get('servers')} servers, {summary.get('workers')} "
             f"workers, {summary.get('loader')} loader"
             + (f", EMULATED compute {emulated:g} ms/step" if emulated else ""))
    phases = WORKER_PHASES
    text = f"## Where the time went: {title}\n\n"
    text += table("Workers (seconds)", phases, workers)
    if servers:
        text += "\n" + table("Servers (seconds of calls, summed)",
                             SERVER_PHASES, servers,
                             extra=("MiB received", "MiB sent"))
        text += ("\nA server's seconds are its handlers' time; sending and "
                 "receiving the bytes happens outside them, so a server whose "
                 "link is the bottleneck still shows mostly idle: compare its "
                 "MiB with the link's rate.\n")
    else:
        text += "\n(no per-server figures in this summary)\n"
    out = args.out or args.run_dir
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    plot(os.path.join(out, "report.png"), title,
         [("workers", phases, workers), ("servers", SERVER_PHASES, servers)])
    print(text, end="")
    print(f"report: wrote {out}/report.md and {out}/report.png")


if __name__ == "__main__":
    main()
