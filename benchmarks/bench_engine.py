"""Per-request latency of the reference engine, per profile (not a timed test).

    python benchmarks/bench_engine.py                      # shipped catalog (or 500 synthetic docs)
    python benchmarks/bench_engine.py --collection PATH --rounds 5 --json out.json

For each profile: p50/p95/p99 of in-process ``Engine.search`` wall time over every query x
rounds, (a) with the query-embedding cache (warm: the steady state of a service) and (b)
without it (``embedder.read_cache = False``: every request encodes its query). The lexical
profile never embeds, so it has one row.

Every row is also given against two peers measured in the same run: one ``SELECT 1`` through
the engine's connection pool (the floor of any search) and one query encoded by the model
alone (what a cold request adds). The 100,000-listing catalog with real vectors is
benchmarks/bench_100k.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine.core import Engine, EngineSettings

ROOT = Path(__file__).resolve().parent.parent


def percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.asarray(samples)
    return {
        "n": len(samples),
        "p50": round(float(np.percentile(arr, 50)), 3),
        "p95": round(float(np.percentile(arr, 95)), 3),
        "p99": round(float(np.percentile(arr, 99)), 3),
        "mean": round(float(arr.mean()), 3),
    }


def load_collection(path: Path | None) -> tuple[Collection, str]:
    from pytest_searcheval.collection import load

    if path is not None:
        return load(path), str(path)
    if (ROOT / "corpus").is_dir() and (ROOT / "qrels" / "judgments.tsv").exists():
        return load(ROOT), "shipped catalog"
    from pytest_searcheval.x402.synth import write_synthetic

    tmp = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    write_synthetic(tmp, n_docs=500, n_queries=50)
    return load(tmp), "synthetic 500 (collection_synth)"


def measure(
    engine: Engine, queries: list[str], profile: str, rounds: int, *, cached: bool
) -> dict[str, float]:
    engine.embedder.read_cache = cached
    try:
        # Warm-up: pool connections, plans, the model; in cached mode every query once, so the
        # timed rounds measure the steady state of a service that has seen its queries.
        for q in queries if cached else queries[:5]:
            engine.search(q, profile=profile, limit=10)
        times: list[float] = []
        for _ in range(rounds):
            for q in queries:
                t0 = time.perf_counter()
                engine.search(q, profile=profile, limit=10)
                times.append((time.perf_counter() - t0) * 1000.0)
        return percentiles(times)
    finally:
        engine.embedder.read_cache = True


def run_profiles(engine: Engine, queries: list[str], rounds: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for profile, reason in engine.profiles().items():
        if reason is not None:
            rows.append({"profile": profile, "unavailable": reason})
            continue
        modes = [("n/a", True)] if profile == "lexical" else [("warm", True), ("cold", False)]
        for label, cached in modes:
            stats = measure(engine, queries, profile, rounds if cached else 1, cached=cached)
            rows.append({"profile": profile, "query_cache": label, **stats})
    return rows


def peers(engine: Engine, queries: list[str]) -> dict[str, float]:
    """Medians, in ms, of one ``SELECT 1`` through the pool and of encoding one query."""
    trips: list[float] = []
    for _ in range(max(50, len(queries))):
        t0 = time.perf_counter()
        with engine.schema.connection() as conn:
            conn.execute("SELECT 1").fetchone()
        trips.append((time.perf_counter() - t0) * 1000.0)
    engine.embedder.encode(queries[:1])
    encodes: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        engine.embedder.encode([q])
        encodes.append((time.perf_counter() - t0) * 1000.0)
    return {
        "select_1_ms": round(statistics.median(trips), 3),
        "encode_one_ms": round(statistics.median(encodes), 3),
    }


def print_rows(title: str, rows: list[dict[str, Any]], peer: dict[str, float]) -> None:
    print(f"\n## {title}")
    print(
        f"peers: SELECT 1 through the pool {peer['select_1_ms']:.2f} ms,"
        f" encode one query {peer['encode_one_ms']:.2f} ms (medians)"
    )
    print(
        f"{'profile':<15} {'q-cache':<8} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
        f" {'p50/SELECT 1':>13} {'p50/encode':>11}"
    )
    for r in rows:
        if "unavailable" in r:
            print(f"{r['profile']:<15} unavailable: {r['unavailable']}")
            continue
        print(
            f"{r['profile']:<15} {r['query_cache']:<8} {r['n']:>6} {r['p50']:>8.2f}"
            f" {r['p95']:>8.2f} {r['p99']:>8.2f} {r['p50'] / peer['select_1_ms']:>12.1f}x"
            f" {r['p50'] / peer['encode_one_ms']:>10.2f}x"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reranker", default=os.environ.get("SEARCHEVAL_RERANKER"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from pytest_searcheval.engine import db

    report: dict[str, Any] = {
        "date": datetime.date.today().isoformat(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "load_average": os.getloadavg()[0],
        },
    }
    server = db.open_server()
    try:
        collection, name = load_collection(args.collection)
        queries = [q.text for q in collection.queries.values()] or [
            d.title for d in list(collection.documents.values())[:50]
        ]
        settings = EngineSettings(reranker_path=args.reranker)
        t0 = time.perf_counter()
        with Engine.start(collection, dsn=server.dsn, settings=settings) as engine:
            start_s = time.perf_counter() - t0
            rows = run_profiles(engine, queries, args.rounds)
            peer = peers(engine, queries)
            info = engine.describe()
        title = f"{name}: {len(collection.documents)} docs, {len(queries)} queries"
        print(f"engine start (schema, index, embeddings from cache): {start_s:.2f} s")
        print(
            f"{report['date']} {report['machine']['cpus']} cpus,"
            f" load {report['machine']['load_average']:.1f}"
        )
        print_rows(title, rows, peer)
        report["catalog"] = {"name": title, "start_seconds": start_s, "rows": rows, "peers": peer}
        report["model"] = info["model"]

    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
