#!/usr/bin/python3
"""The A/B demo (`make demo`): the CNTK-like baseline (--servers=1
--loader=sequential) against shardps' fix (--servers=4 --loader=parallel)
at N = 1, 4 and 8 workers on the emulated cluster, a side-by-side table,
the performance model's check, and plots under experiments/results/demo/.

  sudo experiments/demo.py [--workers 1,4,8] [--out DIR]
"""

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import abkit  # noqa: E402
import perfmodel  # noqa: E402

BASELINE = (1, "sequential")
FIX = (4, "parallel")


def table(rows, workers):
    def get(n, sl):
        return next(r for r in rows if (r["workers"], r["servers"], r["loader"])
                    == (n, sl[0], sl[1]))
    lines = [
        "| N | baseline init (s) | fix init (s) | baseline epoch (s) | fix epoch (s) "
        "| baseline samples/s | fix samples/s | speed-up (samples/s) |",
        "|---|---|---|---|---|---|---|---|"]
    for n in workers:
        b, f = get(n, BASELINE), get(n, FIX)
        if not (b["ok"] and f["ok"]):
            lines.append(f"| {n} | failed run: see {b['run_dir']} / {f['run_dir']} |")
            continue
        lines.append(
            f"| {n} | {b['init_seconds']:.2f} | {f['init_seconds']:.2f} "
            f"| {b['epoch_seconds']:.1f} | {f['epoch_seconds']:.1f} "
            f"| {b['samples_per_second']:.0f} | {f['samples_per_second']:.0f} "
            f"| {f['samples_per_second'] / b['samples_per_second']:.2f}x |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    abkit.add_run_flags(ap, os.path.join(abkit.ROOT, "experiments", "results",
                                         "demo"))
    ap.add_argument("--workers", type=lambda t: [int(x) for x in t.split(",")],
                    default=[1, 4, 8])
    args = ap.parse_args()
    abkit.ensure_root()
    # The baseline and the fix at every N, plus the one extra N=1 run the
    # model's calibration needs (one server, parallel loader).
    points = [(BASELINE[0], n, BASELINE[1]) for n in args.workers]
    points += [(FIX[0], n, FIX[1]) for n in args.workers]
    points.append((1, 1, "parallel"))
    rows = abkit.run_grid(points, args)
    text = table(rows, args.workers)
    print()
    print(text)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n")
    print()
    perfmodel.check(rows, args.out, "(demo)")
    breakdown(rows, max(args.workers), args.out)


def breakdown(rows, n, out):
    """Where the time went in the baseline's and the fix's runs at N = n
    (experiments/report.py), into out/breakdown-{baseline,fix}/."""
    report = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "report.py")
    for name, (servers, loader) in (("baseline", BASELINE), ("fix", FIX)):
        row = next((r for r in rows if (r["workers"], r["servers"],
                                        r["loader"]) == (n, servers, loader)),
                   None)
        if row is None or not row["ok"]:
            print(f"demo: no {name} run at N={n} to break down")
            continue
        subprocess.run([report, row["run_dir"], "--out",
                        os.path.join(out, f"breakdown-{name}")], check=False)


if __name__ == "__main__":
    main()
