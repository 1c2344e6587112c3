"""The engine's text and vector hot paths against the pure-Python code they replaced.

    python benchmarks/bench_hotpaths.py [--repeats 5]

Each line times the library the engine uses beside its peer, on the same input in the same
run, and prints the ratio (peer / engine):

1. stemming: PyStemmer's ``porter`` (engine/index.py) vs the former pure-Python Porter
   (tests/engine/text_reference.py), every distinct word of the shipped catalog, uncached;
   and the whole analyzer over the catalog with each stemmer;
2. edit distance: rapidfuzz's ``OSA`` (engine/title.py) vs the former pure-Python OSA, on the
   (title token, query token) pairs that the title match compares;
3. vectors: pgvector's binary adapter vs the former ``.7g`` text literal, per vector, and the
   exactness of each after a round trip through PostgreSQL (max |stored - float32|); then an
   exact semantic query (the shipped catalog) with the query vector sent each way.

Medians of ``--repeats`` timings; identical outputs are checked before anything is printed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "engine"))

from text_reference import osa as reference_osa  # noqa: E402
from text_reference import stem as reference_stem  # noqa: E402

from pytest_searcheval.collection import load  # noqa: E402
from pytest_searcheval.engine import index, title  # noqa: E402


def median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def line(what: str, ours: float, peer: float, unit: str, scale: float, n: int) -> None:
    print(
        f"{what:<44} engine {ours * scale / n:9.3f} {unit}   former {peer * scale / n:9.3f} {unit}"
        f"   ratio {peer / ours:6.1f}x"
    )


def stemming(coll: Any, repeats: int) -> None:
    words = sorted(
        {t for d in coll.documents.values() for t in index.tokenize(f"{d.title} {d.text}")}
        | {t for q in coll.queries.values() for t in index.tokenize(q.text)}
    )
    ours_fn = index.stem.__wrapped__  # type: ignore[attr-defined]
    peer_fn = reference_stem.__wrapped__  # type: ignore[attr-defined]
    assert [ours_fn(w) for w in words] == [peer_fn(w) for w in words]
    ours = median_seconds(lambda: [ours_fn(w) for w in words], repeats)
    peer = median_seconds(lambda: [peer_fn(w) for w in words], repeats)
    line(f"stem, {len(words)} distinct words, uncached", ours, peer, "us/word", 1e6, len(words))

    texts = [index.field_texts(d.title, d.text, d.fields, d.x402) for d in coll.documents.values()]

    def analyzer(stemmer: Callable[[str], str]) -> Callable[[], Any]:
        def run() -> Any:
            saved = index.stem
            index.stem = stemmer  # type: ignore[assignment]
            try:
                return [index.field_terms(t) for t in texts]
            finally:
                index.stem = saved

        return run

    assert analyzer(ours_fn)() == analyzer(peer_fn)()
    ours = median_seconds(analyzer(ours_fn), repeats)
    peer = median_seconds(analyzer(peer_fn), repeats)
    line(f"analyzer, {len(texts)} listings, uncached stems", ours, peer, "ms/catalog", 1e3, 1)


def edit_distance(coll: Any, repeats: int) -> None:
    tokens = sorted({t for d in coll.documents.values() for t in title.name_tokens(d.title)})
    queries = sorted({t for q in coll.queries.values() for t in title.name_tokens(q.text)})
    pairs = [
        (t, u)
        for t in tokens
        for u in queries
        if t != u and min(len(t), len(u)) >= title.MIN_FUZZY_LEN and abs(len(t) - len(u)) <= 2
    ]
    assert [title.osa(a, b) for a, b in pairs] == [reference_osa(a, b) for a, b in pairs]
    ours = median_seconds(lambda: [title.osa(a, b) for a, b in pairs], repeats)
    peer = median_seconds(lambda: [reference_osa(a, b) for a, b in pairs], repeats)
    line(f"OSA distance, {len(pairs)} title/query pairs", ours, peer, "us/pair", 1e6, len(pairs))


def text_literal(vec: Any) -> str:
    """The former encoding of a vector parameter (engine/dense.py before the adapter)."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vec) + "]"


def vectors(coll: Any, repeats: int) -> None:
    from pgvector.psycopg.vector import VectorBinaryDumper
    from psycopg import sql

    from pytest_searcheval.engine import db, dense
    from pytest_searcheval.engine.core import Engine, EngineSettings

    server = db.open_server()
    try:
        with Engine.start(coll, dsn=server.dsn, settings=EngineSettings(no_result={})) as engine:
            texts = [q.text for q in coll.queries.values()]
            vecs = [v for v in engine.embedder.embed(texts) if v is not None]
            dumper = VectorBinaryDumper(np.ndarray)
            ours = median_seconds(lambda: [dumper.dump(v) for v in vecs], repeats)
            peer = median_seconds(lambda: [text_literal(v) for v in vecs], repeats)
            line(f"vector to the wire, {len(vecs)} x {len(vecs[0])}-d", ours, peer, "us/vector",
                 1e6, len(vecs))  # fmt: skip
            with engine.schema.connection() as conn:
                conn.execute("CREATE TEMP TABLE rt (i int, v vector)")
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO rt VALUES (%s, %b)", [(i, v) for i, v in enumerate(vecs)]
                    )
                    cur.executemany(
                        "INSERT INTO rt VALUES (%s, %s::vector)",
                        [(-1 - i, text_literal(v)) for i, v in enumerate(vecs)],
                    )
                rows = dict(conn.execute("SELECT i, v FROM rt", binary=True).fetchall())
                err_bin = max(
                    float(np.max(np.abs(dense.as_array(rows[i]) - v))) for i, v in enumerate(vecs)
                )
                err_txt = max(
                    float(np.max(np.abs(dense.as_array(rows[-1 - i]) - v)))
                    for i, v in enumerate(vecs)
                )
                print(f"{'round trip, max |stored - float32|':<44} engine {err_bin:.3g}"
                      f"   former {err_txt:.3g}")  # fmt: skip
                conn.rollback()

                def query(param: Callable[[Any], Any], placeholder: str) -> Callable[[], Any]:
                    stmt = sql.SQL(
                        "SELECT doc_id FROM embeddings ORDER BY embedding <=> {} LIMIT 20"
                    ).format(sql.SQL(placeholder))

                    def run() -> Any:
                        with conn.transaction():
                            conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                            return [conn.execute(stmt, (param(v),)).fetchall() for v in vecs]

                    return run

                binary = query(lambda v: v, "%b")
                textual = query(text_literal, "%s::vector")
                ours = median_seconds(binary, repeats)
                peer = median_seconds(textual, repeats)
                line(
                    f"exact top-20 over {len(coll.documents)} vectors", ours, peer, "ms/query",
                    1e3, len(vecs),
                )  # fmt: skip
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-db", action="store_true", help="skip the PostgreSQL measurements")
    args = parser.parse_args(argv)
    coll = load(ROOT)
    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{datetime.date.today()} {platform.machine()} {os.cpu_count()} cpus,"
        f" load {load_avg:.1f}, python {platform.python_version()}; medians of {args.repeats}"
    )
    stemming(coll, args.repeats)
    edit_distance(coll, args.repeats)
    if not args.no_db:
        vectors(coll, args.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
