"""The reference engine at 100,000 real-looking listings with real model vectors.

    nice -n 10 python benchmarks/bench_100k.py                 # 100k (first run encodes: long)
    python benchmarks/bench_100k.py --docs 5000                # smoke check, a few minutes
    python benchmarks/bench_100k.py --cache DIR --json out.json --build-sizes 10000,50000

The catalog is generated at run time from ``--seed`` (benchmarks/synth_catalog.py: listings
recombined from the shipped catalog's prose, tags and payment options and the taxonomy's
capabilities; nothing is downloaded, nothing generated is committed). What it measures, each
figure beside a peer measured in the same run:

1. encoding rate of the engine's ``Embedder.encode`` against the former path
   (``SentenceTransformer.encode``, batch 64, two torch threads, texts in input order in
   chunks of 2048), on a sample of the catalog's embedding texts: texts/s and CPU s per text,
   rounds interleaved; the two outputs' largest difference;
2. the document vectors (all-MiniLM-L6-v2, encoded by the engine's path): cached under
   ``--cache`` (default ``~/.cache/pytest-searcheval/bench-100k``) in files of 5,000 keyed by
   model revision, generator version, seed, position and a hash of the texts, so a rerun or a
   larger ``--docs`` encodes only what is missing;
3. indexing: ``Engine.start`` on an embedded PostgreSQL (bulk load by COPY, statistics, the
   in-memory catalog, the HNSW build) with its own timings, PostgreSQL relation sizes, the
   PSS of this process and of the server's processes;
4. HNSW recall@10 against the exact scan, per ``hnsw.ef_search``, over the query set (the
   shipped 189 golden queries and one per taxonomy capability), with both latencies;
5. per-profile latency of ``Engine.search`` (limit 10, extraction on) with every query
   encoded (query cache off) and warm (query vectors cached), p50/p95/p99, against the
   peer "encode one query" (the same texts, the model alone); ``--timed-nice 0`` runs 4 and 5
   at a service's priority when the rest runs under ``nice -n 10``;
6. ``--build-sizes``: HNSW build time and index size for the first N vectors in a scratch
   table (same m, ef_construction, maintenance_work_mem), beside the engine's own build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from synth_catalog import VERSION, generate  # noqa: E402

from pytest_searcheval.collection.model import Collection  # noqa: E402
from pytest_searcheval.engine.documents import embedding_text  # noqa: E402
from pytest_searcheval.engine.embed import Embedder, Vector  # noqa: E402

CHUNK = 5000
PROFILES = ("lexical", "semantic", "hybrid")


def say(text: str) -> None:
    print(text, flush=True)


def pct(values: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(values, dtype=np.float64)
    return {
        "n": len(values),
        "p50": round(float(np.percentile(arr, 50)), 2),
        "p95": round(float(np.percentile(arr, 95)), 2),
        "p99": round(float(np.percentile(arr, 99)), 2),
        "mean": round(float(arr.mean()), 2),
    }


# -- 1. encoding rate ------------------------------------------------------------------------


def former_encode(embedder: Embedder, texts: Sequence[str]) -> np.ndarray[Any, Any]:
    """What ``Embedder`` did before: chunks of 2048 in input order, ``model.encode`` with
    batch 64 and two torch threads (sentence-transformers sorts each call by length)."""
    import torch

    model = embedder._load()
    torch.set_num_threads(2)
    try:
        parts = [
            model.encode(
                list(texts[s : s + 2048]),
                batch_size=64,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            for s in range(0, len(texts), 2048)
        ]
    finally:
        torch.set_num_threads(1)
    return np.concatenate(parts).astype(np.float32)


def encoding_rate(embedder: Embedder, texts: Sequence[str], rounds: int) -> dict[str, Any]:
    embedder.encode(list(texts[:64]))  # model loaded, first-call costs paid
    runs: dict[str, list[tuple[float, float]]] = {"former": [], "engine": []}
    outputs: dict[str, Any] = {}
    ways: dict[str, Callable[[], Any]] = {
        "former": lambda: former_encode(embedder, texts),
        "engine": lambda: embedder.encode(list(texts)),
    }
    for _ in range(rounds):
        for name, fn in ways.items():
            wall, cpu = time.perf_counter(), time.process_time()
            outputs[name] = fn()
            runs[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            say(f"  encode {name}: {len(texts) / runs[name][-1][0]:.1f} texts/s")
    out: dict[str, Any] = {"texts": len(texts), "rounds": rounds}
    for name, samples in runs.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        out[name] = {
            "texts_per_s": round(len(texts) / wall, 1),
            "cpu_ms_per_text": round(1000 * cpu / len(texts), 2),
        }
    out["ratio_texts_per_s"] = round(out["engine"]["texts_per_s"] / out["former"]["texts_per_s"], 2)
    out["ratio_cpu_per_text"] = round(
        out["former"]["cpu_ms_per_text"] / out["engine"]["cpu_ms_per_text"], 2
    )
    out["max_abs_difference"] = float(np.abs(outputs["engine"] - outputs["former"]).max())
    return out


# -- 2. document vectors, cached -------------------------------------------------------------


def cached_vectors(
    embedder: Embedder, texts: Sequence[str], cache: Path, seed: int
) -> tuple[np.ndarray[Any, Any], dict[str, Any]]:
    folder = cache / f"{embedder.revision[:12]}-gen{VERSION}-seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    parts: list[np.ndarray[Any, Any]] = []
    encoded = 0
    seconds = 0.0
    for start in range(0, len(texts), CHUNK):
        chunk = list(texts[start : start + CHUNK])
        digest = hashlib.sha256("\x1e".join(chunk).encode("utf-8")).hexdigest()[:16]
        path = folder / f"{start:08d}-{len(chunk)}-{digest}.npy"
        if path.exists():
            parts.append(np.load(path))
            continue
        t0 = time.perf_counter()
        vectors = embedder.encode(chunk)
        seconds += time.perf_counter() - t0
        encoded += len(chunk)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, vectors)
        os.replace(tmp, path)
        parts.append(vectors)
        say(
            f"  encoded {start + len(chunk)}/{len(texts)}"
            f" ({encoded / seconds:.1f} texts/s this run, load {os.getloadavg()[0]:.1f})"
        )
    info = {"dir": str(folder), "encoded_now": encoded, "encode_seconds": round(seconds, 1)}
    if encoded:
        info["texts_per_s"] = round(encoded / seconds, 1)
    return np.concatenate(parts), info


class PrecomputedEmbedder(Embedder):
    """Document texts get their cached vectors; anything else (queries) the real model."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.known: dict[str, Vector] = {}

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        if texts and all(t in self.known for t in texts):
            return [self.known[t] for t in texts]
        return super().embed(texts)


# -- 3. memory -------------------------------------------------------------------------------


def pss_mb(pids: Sequence[int]) -> float:
    import psutil

    total = 0
    for pid in pids:
        try:
            info = psutil.Process(pid).memory_full_info()
        except (psutil.Error, OSError):
            continue
        total += getattr(info, "pss", info.rss)
    return round(total / 2**20, 1)


def server_pids(pgdata: Path | None) -> list[int]:
    import psutil

    if pgdata is None:
        return []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if any(str(pgdata) in part for part in cmd) and "postgres" in " ".join(cmd):
            return [proc.pid] + [c.pid for c in proc.children(recursive=True)]
    return []


def relation_sizes(conn: Any, schema: str) -> dict[str, int]:
    rows = conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 't') ORDER BY 2 DESC",
        (schema,),
    ).fetchall()
    return {str(name): int(size) for name, size in rows}


# -- 4. recall against exact -----------------------------------------------------------------


def recall_by_ef(
    engine: Any, vectors: Sequence[Vector], efs: Sequence[int], k: int = 10
) -> dict[str, Any]:
    from pytest_searcheval.engine import dense

    truth: list[set[str]] = []
    exact_ms: list[float] = []
    with engine.schema.connection() as conn:
        for vec in vectors:
            with conn.transaction():
                t0 = time.perf_counter()
                hits = dense.search(conn, vec, limit=k, exact=True)
                exact_ms.append((time.perf_counter() - t0) * 1000)
            truth.append({h.doc_id for h in hits})
        rows = []
        for ef in efs:
            recalls: list[float] = []
            ms: list[float] = []
            for vec, want in zip(vectors, truth, strict=True):
                with conn.transaction():
                    t0 = time.perf_counter()
                    got = dense.search(conn, vec, limit=k, exact=False, ef_search=ef)
                    ms.append((time.perf_counter() - t0) * 1000)
                recalls.append(len(want & {h.doc_id for h in got}) / len(want))
            lat = pct(ms)
            rows.append(
                {
                    "ef_search": ef,
                    "recall": round(float(np.mean(recalls)), 4),
                    "min_recall": round(float(np.min(recalls)), 2),
                    "queries_below_0.9": int(sum(r < 0.9 for r in recalls)),
                    "p50_ms": lat["p50"],
                    "p95_ms": lat["p95"],
                    "exact_p50_over_hnsw_p50": round(statistics.median(exact_ms) / lat["p50"], 1),
                }
            )
            say(f"  ef_search {ef}: recall@{k} {rows[-1]['recall']}, p50 {lat['p50']} ms")
    return {"k": k, "queries": len(vectors), "exact_ms": pct(exact_ms), "rows": rows}


# -- 5. latency per profile ------------------------------------------------------------------


def profile_latency(engine: Any, queries: Sequence[str], rounds: int) -> dict[str, Any]:
    embedder = engine.embedder
    for q in queries[:10]:
        for profile in PROFILES:
            engine.search(q, profile=profile, limit=10)
    out: dict[str, Any] = {}
    encode_ms: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        embedder.encode([q])
        encode_ms.append((time.perf_counter() - t0) * 1000)
    out["peer: encode one query"] = pct(encode_ms)
    for label, cached in (("cold", False), ("warm", True)):
        embedder.read_cache = cached
        if cached:
            for q in queries:
                embedder.embed_one(q)
        try:
            for profile in PROFILES:
                if label == "warm" and profile == "lexical":
                    continue
                name = profile if profile == "lexical" else f"{profile} {label}"
                ms: list[float] = []
                for _ in range(rounds if cached else 1):
                    for q in queries:
                        t0 = time.perf_counter()
                        engine.search(q, profile=profile, limit=10)
                        ms.append((time.perf_counter() - t0) * 1000)
                out[name] = pct(ms)
                peer = out["peer: encode one query"]["p50"]
                out[name]["p50_over_encode_p50"] = round(out[name]["p50"] / peer, 2)
                say(f"  {name}: {out[name]}")
        finally:
            embedder.read_cache = True
    return out


def renice(niceness: int | None, pgdata: Path | None) -> Callable[[], None]:
    """Set this process and the embedded server's processes to ``niceness``; returns what
    puts their former niceness back (nothing to do for None)."""
    import psutil

    if niceness is None:
        return lambda: None
    procs = [psutil.Process(os.getpid())] + [psutil.Process(p) for p in server_pids(pgdata)]
    former: list[tuple[Any, int]] = []
    for proc in procs:
        try:
            former.append((proc, proc.nice()))
            proc.nice(niceness)
        except psutil.Error:
            continue

    def restore() -> None:
        for proc, value in former:
            try:
                proc.nice(value)
            except psutil.Error:
                continue

    return restore


# -- 6. build time by size -------------------------------------------------------------------


def build_by_size(dsn: str, vectors: np.ndarray[Any, Any], sizes: Sequence[int]) -> list[Any]:
    import psycopg
    from psycopg import sql

    from pytest_searcheval.engine import dense
    from pytest_searcheval.engine.dense import DenseParams

    params = DenseParams()
    schema = f"bench_build_{os.getpid()}"
    rows = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        dense.register_vector(conn)
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            for n in sizes:
                table = sql.Identifier(schema, f"v{n}")
                conn.execute(
                    sql.SQL("CREATE TABLE {} (id int, embedding public.vector({}))").format(
                        table, sql.Literal(vectors.shape[1])
                    )
                )
                with (
                    conn.cursor() as cur,
                    cur.copy(
                        sql.SQL("COPY {} (id, embedding) FROM STDIN (FORMAT BINARY)").format(table)
                    ) as cp,
                ):
                    cp.set_types(["int4", "vector"])
                    for i in range(n):
                        cp.write_row((i, vectors[i]))
                conn.execute(sql.SQL("ANALYZE {}").format(table))
                conn.execute(
                    "SELECT set_config('maintenance_work_mem', %s, false)", (params.build_memory,)
                )
                index = sql.Identifier(f"v{n}_hnsw")
                t0 = time.perf_counter()
                conn.execute(
                    sql.SQL(
                        "CREATE INDEX {} ON {} USING hnsw (embedding public.vector_cosine_ops)"
                        " WITH (m = {}, ef_construction = {})"
                    ).format(
                        index,
                        table,
                        sql.Literal(params.hnsw_m),
                        sql.Literal(params.hnsw_ef_construction),
                    )
                )
                seconds = time.perf_counter() - t0
                size = conn.execute(
                    "SELECT pg_relation_size(%s::regclass)", (f"{schema}.v{n}_hnsw",)
                ).fetchone()
                nbytes = int(size[0]) if size else 0
                rows.append(
                    {
                        "vectors": n,
                        "build_seconds": round(seconds, 1),
                        "us_per_vector": round(1e6 * seconds / n, 1),
                        "index_bytes": nbytes,
                        "bytes_per_vector": round(nbytes / n),
                    }
                )
                say(f"  build {n}: {rows[-1]}")
                conn.execute(sql.SQL("DROP TABLE {}").format(table))
        finally:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return rows


# -- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "pytest-searcheval"
        / "bench-100k",
        help="directory of the cached document vectors (outside the repository)",
    )
    parser.add_argument("--encode-sample", type=int, default=1000)
    parser.add_argument("--encode-rounds", type=int, default=2)
    parser.add_argument("--encode-only", action="store_true", help="fill the vector cache, stop")
    parser.add_argument("--ef", default="10,20,40,64,100,200,400,1000")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the warm latency")
    parser.add_argument("--build-sizes", default="", help="e.g. 10000,50000")
    parser.add_argument(
        "--timed-nice",
        type=int,
        default=None,
        help="niceness of this process and its PostgreSQL during the recall and latency"
        " measurements (e.g. 0, a service's priority, when the rest runs under nice -n 10);"
        " restored afterwards",
    )
    parser.add_argument(
        "--exact-below",
        type=int,
        default=None,
        help="the engine's DenseParams.exact_below (default 20,000; lower it to get an HNSW"
        " index on a small smoke run)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "docs": args.docs,
        "seed": args.seed,
    }
    t0 = time.perf_counter()
    docs, queries = generate(args.docs, seed=args.seed)
    texts = [embedding_text(d) for d in docs]
    report["generate_seconds"] = round(time.perf_counter() - t0, 1)
    say(f"generated {len(docs)} listings, {len(queries)} queries in {report['generate_seconds']} s")

    work = Path(tempfile.mkdtemp(prefix="bench-100k-"))
    embedder = PrecomputedEmbedder(cache_dir=work / "query-cache")
    report["model"] = embedder.info()
    if not args.encode_only and args.encode_sample > 0:
        import random

        sample = random.Random(args.seed).sample(texts, min(args.encode_sample, len(texts)))
        say(f"encoding rate on {len(sample)} texts, {args.encode_rounds} rounds each:")
        report["encoding"] = encoding_rate(embedder, sample, args.encode_rounds)
        say(f"  {report['encoding']}")
    vectors, report["vector_cache"] = cached_vectors(embedder, texts, args.cache, args.seed)
    say(f"document vectors: {report['vector_cache']}")
    if args.encode_only:
        return 0
    embedder.known = dict(zip(texts, vectors, strict=True))
    report["load_average_start"] = os.getloadavg()

    from pytest_searcheval.collection import load
    from pytest_searcheval.engine import db
    from pytest_searcheval.engine.core import Engine, EngineSettings
    from pytest_searcheval.engine.dense import DenseParams

    shipped = load(ROOT)
    collection = Collection(
        documents={d.id: d for d in docs},
        queries={},
        judgments={},
        assets=shipped.assets,
    )
    dense = DenseParams() if args.exact_below is None else DenseParams(exact_below=args.exact_below)
    settings = EngineSettings(no_result={}, recall_sample=0, dense=dense)
    server = db.open_server()
    pgdata = getattr(server, "pgdata", None)
    try:
        pids = server_pids(pgdata)
        mem_before = {"bench_pss_mb": pss_mb([os.getpid()]), "server_pss_mb": pss_mb(pids)}
        t0 = time.perf_counter()
        with Engine.start(collection, dsn=server.dsn, settings=settings, embedder=embedder) as eng:
            start_seconds = time.perf_counter() - t0
            timings = {k: round(v, 2) for k, v in eng.timings.items()}
            report["indexing"] = {"engine_start_seconds": round(start_seconds, 1), **timings}
            say(f"indexed in {start_seconds:.1f} s: {timings}")
            with eng.schema.connection() as conn:
                sizes = relation_sizes(conn, eng.schema_name)
            pids = server_pids(pgdata)
            report["memory"] = {
                "before": mem_before,
                "after_index": {
                    "bench_pss_mb": pss_mb([os.getpid()]),
                    "server_pss_mb": pss_mb(pids),
                },
                "relations_mb": {k: round(v / 2**20, 1) for k, v in sizes.items()},
                "hnsw_bytes_per_vector": round(sizes.get("embeddings_hnsw_cosine", 0) / len(docs)),
            }
            say(f"memory: {report['memory']}")
            qvecs = [v for v in embedder.embed(queries) if v is not None]
            restore = renice(args.timed_nice, pgdata)
            report["timed_nice"] = args.timed_nice
            if eng.hnsw:
                efs = [int(x) for x in args.ef.split(",") if x]
                say(f"recall@10 against exact over {len(qvecs)} queries:")
                report["recall"] = recall_by_ef(eng, qvecs, efs)
            say(f"latency over {len(queries)} queries (limit 10):")
            report["latency_ms"] = profile_latency(eng, queries, args.rounds)
            report["describe_dense"] = eng.describe()["dense"]
            restore()
        sizes_wanted = [int(x) for x in args.build_sizes.split(",") if x]
        if sizes_wanted:
            say("HNSW build by size (scratch tables):")
            report["build_by_size"] = build_by_size(server.dsn, vectors, sizes_wanted)
    finally:
        server.stop()
    report["load_average_end"] = os.getloadavg()
    text = json.dumps(report, indent=2, default=str)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    say(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
