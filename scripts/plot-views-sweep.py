"""Draws seed 001's picture from scripts/bench-views-sweep.sh's JSON lines: full-build time and
query latency (p50) by vbucket count. Every number is the median of that vbucket count's rounds
(each round is its own process), so one noisy round moves nothing. Also prints the markdown
table BENCHMARKS.md shows, and each count's ratio to the smallest count.

    plot-views-sweep.py RESULTS.jsonl OUTPUT.png
"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def median_rounds(path):
    rounds = {}
    for line in open(path):
        line = line.strip()
        if line:
            row = json.loads(line)
            rounds.setdefault(row["vbuckets"], []).append(row)
    rows = []
    for vbuckets in sorted(rounds):
        runs = rounds[vbuckets]
        row = {"vbuckets": vbuckets, "rounds": len(runs)}
        for field, value in runs[0].items():
            if isinstance(value, (int, float)) and field not in row and field != "round":
                row[field] = statistics.median(run[field] for run in runs)
        rows.append(row)
    return rows


def main(path, output):
    rows = median_rounds(path)
    vbuckets = [r["vbuckets"] for r in rows]
    figure, (build, queries) = plt.subplots(1, 2, figsize=(11, 4.5))
    build.plot(vbuckets, [r["build_secs"] for r in rows], marker="o", label="full build (s)")
    build.set_xscale("log", base=2)
    build.set_xticks(vbuckets, [str(v) for v in vbuckets])
    build.set_ylim(bottom=0)
    build.set_xlabel("vbuckets")
    build.set_ylabel("seconds to build both design documents")
    build.set_title(f"{rows[0]['docs']:,.0f} documents, {rows[0]['cores']} cores")
    build.grid(True, alpha=0.3)
    for field, label in [("key_p50_us", "key"), ("range_p50_us", "range (100 rows)"),
                         ("reduce_p50_us", "reduce (_sum, one week)")]:
        queries.plot(vbuckets, [r[field] for r in rows], marker="o", label=label)
    queries.set_xscale("log", base=2)
    queries.set_xticks(vbuckets, [str(v) for v in vbuckets])
    queries.set_ylim(bottom=0)
    queries.set_xlabel("vbuckets")
    queries.set_ylabel("query latency p50 (µs)")
    queries.legend()
    queries.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(output, dpi=110)
    print("| vbuckets | build s | docs/s | docs per CPU-second | CPU % (load avg) | key p50/p99 µs | range p50/p99 µs | reduce p50/p99 µs |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['vbuckets']} | {r['build_secs']:.1f} | {r['docs_per_sec']:,.0f} | {r['docs_per_cpu_sec']:,.0f} | "
              f"{r['cpu_percent']:.0f} ({r['load_average']:.1f}) | {r['key_p50_us']:g}/{r['key_p99_us']:g} | "
              f"{r['range_p50_us']:g}/{r['range_p99_us']:g} | {r['reduce_p50_us']:g}/{r['reduce_p99_us']:g} |")
    first = rows[0]
    print()
    for r in rows[1:]:
        ratios = ", ".join(f"{label} {r[field] / first[field]:.2f}x" for field, label in [
            ("build_secs", "build"), ("key_p50_us", "key p50"), ("range_p50_us", "range p50"),
            ("reduce_p50_us", "reduce p50")])
        print(f"{r['vbuckets']} vs {first['vbuckets']} vbuckets (medians of {r['rounds']} rounds): {ratios}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
