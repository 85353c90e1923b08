"""Draws seed 001's picture from scripts/bench-views-sweep.sh's JSON lines: full-build time and
query latency (p50) by vbucket count; each vbucket count keeps its fastest round, since the
machine is shared. Also prints the markdown table BENCHMARKS.md shows.

    plot-views-sweep.py RESULTS.jsonl OUTPUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def best_rounds(path):
    best = {}
    for line in open(path):
        line = line.strip()
        if not line:
            continue
        row = json.loads(line)
        kept = best.get(row["vbuckets"])
        if kept is None or row["build_secs"] < kept["build_secs"]:
            best[row["vbuckets"]] = row
    return [best[v] for v in sorted(best)]


def main(path, output):
    rows = best_rounds(path)
    vbuckets = [r["vbuckets"] for r in rows]
    figure, (build, queries) = plt.subplots(1, 2, figsize=(11, 4.5))
    build.plot(vbuckets, [r["build_secs"] for r in rows], marker="o", label="full build (s)")
    build.set_xscale("log", base=2)
    build.set_xticks(vbuckets, [str(v) for v in vbuckets])
    build.set_ylim(bottom=0)
    build.set_xlabel("vbuckets")
    build.set_ylabel("seconds to build both design documents")
    build.set_title(f"{rows[0]['docs']:,} documents, {rows[0]['cores']} cores")
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
              f"{r['cpu_percent']:.0f} ({r['load_average']:.1f}) | {r['key_p50_us']}/{r['key_p99_us']} | "
              f"{r['range_p50_us']}/{r['range_p99_us']} | {r['reduce_p50_us']}/{r['reduce_p99_us']} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
