"""Load time of a synthetic native collection (default: 100k listings, 5k queries).

    python benchmarks/bench_collection.py [--docs 100000] [--queries 5000] [--dir DIR]

Prints the file sizes, the best-of-N load time, and its peer: the time of a plain
``json.loads`` pass over the same corpus lines in the same run, so that the validation +
hashing overhead is visible as a ratio (wall and CPU time); with the date, machine and load.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from pytest_searcheval.collection import load
from pytest_searcheval.x402.synth import write_synthetic


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--judged", type=int, default=20, help="judged documents per query")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="reuse or create the collection here")
    args = parser.parse_args()
    print(
        f"{datetime.date.today()} {platform.machine()} {os.cpu_count()} cpus,"
        f" load {os.getloadavg()[0]:.1f}, python {platform.python_version()}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.dir or tmp)
        if not (root / "collection.yaml").exists():
            t = time.perf_counter()
            write_synthetic(root, args.docs, args.queries, args.judged)
            print(f"generated in {time.perf_counter() - t:.2f} s")
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        print(f"collection: {size / 1e6:.1f} MB")
        best = cpu = float("inf")
        for _ in range(args.repeat):
            t, c0 = time.perf_counter(), time.process_time()
            c = load(root)
            best = min(best, time.perf_counter() - t)
            cpu = min(cpu, time.process_time() - c0)
        n_j = sum(len(v) for v in c.judgments.values())
        # CPU time too: on a shared machine wall time includes waiting for a core.
        print(
            f"load(): {best:.2f} s wall, {cpu:.2f} s CPU for {len(c.documents)} documents, "
            f"{len(c.queries)} queries, {n_j} judgments (best of {args.repeat})"
        )
        floor = floor_cpu = float("inf")
        for _ in range(args.repeat):
            t, c0 = time.perf_counter(), time.process_time()
            for p in sorted((root / "corpus").glob("*.jsonl")):
                with p.open(encoding="utf-8") as fh:
                    for line in fh:
                        json.loads(line)
            floor = min(floor, time.perf_counter() - t)
            floor_cpu = min(floor_cpu, time.process_time() - c0)
        print(
            f"json.loads of the corpus alone: {floor:.2f} s wall, {floor_cpu:.2f} s CPU;"
            f" load() / json.loads = {best / floor:.2f} (wall), {cpu / floor_cpu:.2f} (CPU)"
        )


if __name__ == "__main__":
    main()
