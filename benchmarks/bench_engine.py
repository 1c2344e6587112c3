"""Per-request latency of the reference engine, per profile (not a timed test).

    python benchmarks/bench_engine.py                      # shipped catalog (or 500 synthetic docs)
    python benchmarks/bench_engine.py --large 100000       # plus a 100k-document HNSW corpus
    python benchmarks/bench_engine.py --collection PATH --rounds 5 --json out.json

For each profile: p50/p95/p99 of in-process ``Engine.search`` wall time over every query x
rounds, (a) with the query-embedding cache (warm: the steady state of a service) and (b)
without it (``embedder.read_cache = False``: every request encodes its query). The lexical
profile never embeds, so it has one row.

The large corpus is synthetic: Zipf-distributed pseudo-words (so posting lists look like a real
vocabulary) for BM25F, and document vectors that are NOT model outputs: clustered unit vectors
(1000 random centres + noise, seeded by document number), because encoding 100k documents with
MiniLM on a shared 2-core machine ran at about 10 documents/s (measured), hours per run. Query
vectors do come from the real model, so per-request latency includes real query encoding; HNSW
recall@10 against the exact scan is measured on these vectors and reported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_searcheval.collection.model import Collection, Document, Query
from pytest_searcheval.engine.core import Engine, EngineSettings
from pytest_searcheval.engine.dense import DenseParams
from pytest_searcheval.engine.embed import Embedder

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


def print_rows(title: str, rows: list[dict[str, Any]]) -> None:
    print(f"\n## {title}")
    print(f"{'profile':<15} {'q-cache':<8} {'n':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for r in rows:
        if "unavailable" in r:
            print(f"{r['profile']:<15} unavailable: {r['unavailable']}")
            continue
        print(
            f"{r['profile']:<15} {r['query_cache']:<8} {r['n']:>6} {r['p50']:>8.2f}"
            f" {r['p95']:>8.2f} {r['p99']:>8.2f}"
        )


# --- the large synthetic corpus -------------------------------------------------------------

_SYLLABLES = [
    "ka", "lo", "mi", "ren", "tor", "vex", "sa", "dun", "pil", "qua", "zor", "bel", "nim",
    "ost", "gra", "fen", "hul", "jet", "wim", "yar",
]  # fmt: skip


def zipf_vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class ClusteredDocEmbedder(Embedder):
    """The real embedder for queries (<= 8 texts a call); synthetic vectors for bulk calls."""

    centres: Any = None

    def embed(self, texts: Sequence[str]) -> list[Any]:
        if len(texts) <= self.small_batch:
            return super().embed(texts)
        if self.centres is None:
            rng = np.random.default_rng(5)
            self.centres = rng.standard_normal((1000, self.dimensions)).astype(np.float32)
        out: list[Any] = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            rng = np.random.default_rng(seed)
            vec = self.centres[seed % 1000] + 0.6 * rng.standard_normal(self.dimensions)
            out.append((vec / np.linalg.norm(vec)).astype(np.float32))
        return out


def large_collection(n_docs: int, n_queries: int, seed: int = 11) -> Collection:
    """``n_docs`` generic documents: 40 Zipf(1.1) words over a 30k vocabulary, 8-word titles."""
    rng = random.Random(seed)
    vocab = zipf_vocabulary(30_000, rng)
    weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(vocab))]
    docs: dict[str, Document] = {}
    for i in range(n_docs):
        words = rng.choices(vocab, weights=weights, k=40)
        doc_id = f"d{i:06d}"
        docs[doc_id] = Document(
            doc_id,
            " ".join(words[:8]),
            " ".join(words[8:]),
            {},
            None,
            {"liveness": "live", "settlements": rng.randint(0, 5000)},
        )
    queries: dict[str, Query] = {}
    mid = vocab[200:8000]
    for n in range(n_queries):
        qid = f"q{n:04d}"
        queries[qid] = Query(qid, " ".join(rng.sample(mid, rng.randint(2, 4))), "paraphrase", "dev")
    return Collection(documents=docs, queries=queries, judgments={})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--large", type=int, default=0, help="documents of the HNSW corpus")
    parser.add_argument("--large-queries", type=int, default=200)
    parser.add_argument("--reranker", default=os.environ.get("SEARCHEVAL_RERANKER"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from pytest_searcheval.engine import db

    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
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
            info = engine.describe()
        title = f"{name}: {len(collection.documents)} docs, {len(queries)} queries"
        print(f"engine start (schema, index, embeddings from cache): {start_s:.2f} s")
        print_rows(title, rows)
        report["catalog"] = {"name": title, "start_seconds": start_s, "rows": rows}
        report["model"] = info["model"]

        if args.large:
            big = large_collection(args.large, args.large_queries)
            settings = EngineSettings(dense=DenseParams(exact_below=20_000), recall_sample=100)
            t0 = time.perf_counter()
            embedder = ClusteredDocEmbedder()
            with Engine.start(big, dsn=server.dsn, settings=settings, embedder=embedder) as engine:
                start_s = time.perf_counter() - t0
                big_queries = [q.text for q in big.queries.values()]
                rows = run_profiles(engine, big_queries, 1)
                info = engine.describe()
            title = f"synthetic {args.large} docs (HNSW), {len(big_queries)} queries"
            print(
                f"\nlarge corpus start {start_s:.1f} s; timings {info['timings']};"
                f" HNSW recall {info['dense']['hnsw_recall']}"
            )
            print_rows(title, rows)
            report["large"] = {
                "name": title,
                "start_seconds": start_s,
                "timings": info["timings"],
                "hnsw_recall": info["dense"]["hnsw_recall"],
                "rows": rows,
            }
    finally:
        server.stop()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
