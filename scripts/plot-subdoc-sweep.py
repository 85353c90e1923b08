"""Draws the two plots of seed 000 from scripts/bench-subdoc-sweep.sh's CSV: requests/s by
document size and by number of searched paths, one line per difficulty, with the regular GET
baseline as a dashed line.

    plot-subdoc-sweep.py CSV OUTPUT_DIRECTORY
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DIFFICULTIES = ["easy", "medium", "hard", "impossible"]


def main(path, out):
    rows = list(csv.DictReader(open(path)))
    baseline = next(float(r["rps"]) for r in rows if r["sweep"] == "baseline")
    for sweep, x_field, x_label, name in [
        ("size", "keys", "sub-keys in the document (10 paths per lookup)", "subdoc-rps-by-size.png"),
        ("search", "search_keys", "paths per lookup (10,000 sub-keys)", "subdoc-rps-by-paths.png"),
    ]:
        figure, axes = plt.subplots(figsize=(7, 4.5))
        for difficulty in DIFFICULTIES:
            points = sorted(
                (int(r[x_field]), float(r["rps"]))
                for r in rows
                if r["sweep"] == sweep and r["difficulty"] == difficulty
            )
            if points:
                axes.plot(*zip(*points), marker="o", label=difficulty)
        axes.axhline(baseline, linestyle="--", color="grey", label="regular GET (185 B)")
        axes.set_xlabel(x_label)
        axes.set_ylabel("requests/s (200 requesters, 1 connection)")
        axes.set_yscale("log")
        if sweep == "size":
            axes.set_xscale("log")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
        axes.set_title("settee sub-document lookups (seed 000's experiment)")
        figure.tight_layout()
        figure.savefig(f"{out}/{name}", dpi=110)
        print(f"wrote {out}/{name}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
