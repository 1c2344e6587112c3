"""Dense retrieval in pgvector: exact scan for small catalogs, HNSW above a size threshold.

Score = cosine similarity = ``1 - (embedding <=> query)`` (vectors are L2-normalised).
Exact search orders by ``(embedding <=> query) + 0``, which no index can serve, so the plan is
a sequential scan + top-k sort (exact by construction). HNSW search sets
``hnsw.ef_search`` and, with a hard-filter candidate set, ``hnsw.iterative_scan =
relaxed_order`` (pgvector >= 0.8) so filtered queries still fill ``limit`` results.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from psycopg import Connection, sql

from pytest_searcheval.engine.embed import Vector

HNSW_INDEX = "embeddings_hnsw_cosine"


@dataclass(frozen=True)
class DenseParams:
    """``exact_below``: catalogs with fewer documents are scanned exactly (no HNSW index)."""

    exact_below: int = 20_000
    hnsw_m: int = 16
    #: 128, not pgvector's 64: at 100,000 listings with the real model, recall@10 against the
    #: exact scan at ef_search 100 was 0.920 with 64 and 0.963 with 128, for 1.45x the build
    #: time (benchmarks/bench_100k.py, docs/performance.md)
    hnsw_ef_construction: int = 128
    #: 200, not 100: recall@10 at ef_search 100 was 0.944-0.963 over three builds of the
    #: 100,000-listing index, at 200 0.969-0.978, for 1.2 ms more at the median
    ef_search: int = 200
    build_memory: str = "512MB"


class DenseHit(NamedTuple):
    # A tuple: a hybrid query on an exact-scan catalog builds one per document.
    doc_id: str
    score: float


def register_vector(conn: Connection[Any]) -> None:
    """Adapt ``vector`` on ``conn``: numpy arrays go in and vectors come out in pgvector's
    binary format (exact float32, no text formatting or parsing). Only the ``vector`` type is
    looked up (``pgvector.psycopg.register_vector`` also fetches bit, halfvec, sparsevec)."""
    from pgvector.psycopg.vector import register_vector_info
    from psycopg.types import TypeInfo

    register_vector_info(conn, TypeInfo.fetch(conn, "vector"))


def as_array(value: Any) -> npt.NDArray[np.float32]:
    """A loaded ``vector`` column as a float32 array."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, np.float32)


def stored_unit_vectors(conn: Connection[Any], ids: Sequence[str]) -> dict[str, Any]:
    """The stored embeddings of ``ids``, L2-normalised as float64 (zero vectors left out)."""
    rows = conn.execute(
        "SELECT doc_id, embedding FROM embeddings WHERE doc_id = ANY(%s)", (list(ids),), binary=True
    ).fetchall()
    out: dict[str, Any] = {}
    for doc_id, value in rows:
        vec = as_array(value).astype(np.float64)
        norm = float(np.linalg.norm(vec))
        if norm > 0:
            out[str(doc_id)] = vec / norm
    return out


def has_hnsw(conn: Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = %s",
        (HNSW_INDEX,),
    ).fetchone()
    return row is not None


def ensure_hnsw(conn: Connection[Any], params: DenseParams) -> float:
    """Create the HNSW index if absent; returns build seconds (0 if it existed)."""
    if has_hnsw(conn):
        return 0.0
    started = time.perf_counter()
    # HNSW builds far faster when the graph fits in maintenance_work_mem (pgvector docs).
    conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (params.build_memory,))
    # A build takes minutes at a million listings (docs/performance.md); the session's
    # statement timeout (db.connection_kwargs) bounds the statements that serve requests.
    conn.execute("SELECT set_config('statement_timeout', '0', true)")
    conn.execute(
        sql.SQL(
            "CREATE INDEX {} ON embeddings USING hnsw (embedding vector_cosine_ops)"
            " WITH (m = {}, ef_construction = {})"
        ).format(
            sql.Identifier(HNSW_INDEX),
            sql.Literal(params.hnsw_m),
            sql.Literal(params.hnsw_ef_construction),
        )
    )
    return time.perf_counter() - started


def drop_hnsw(conn: Connection[Any]) -> None:
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(HNSW_INDEX)))


def search(
    conn: Connection[Any],
    query: Vector,
    *,
    limit: int,
    exact: bool,
    ef_search: int = 100,
    candidates: sql.Composable | None = None,
    candidate_params: Mapping[str, Any] | None = None,
) -> list[DenseHit]:
    """Top ``limit`` documents by cosine. Must run inside a transaction (settings are LOCAL).

    Exact search orders by ``distance + 0``: an expression no index matches, so the plan is a
    scan and a top-k sort whatever indexes exist, with no setting to change first (the same
    order as the distance itself: adding 0.0 changes no float8)."""
    if not exact:
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef_search),))
        if candidates is not None:
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
    where: sql.Composable = sql.SQL("")
    if candidates is not None:
        where = sql.SQL("WHERE e.doc_id IN ({})").format(candidates)
    distance = sql.SQL("(e.embedding <=> %(qv)b) + 0" if exact else "e.embedding <=> %(qv)b")
    query_sql = sql.SQL(
        "SELECT e.doc_id, 1 - (e.embedding <=> %(qv)b) AS score FROM embeddings e {}"
        " ORDER BY {}, e.doc_id LIMIT %(limit)s"
    ).format(where, distance)
    bind: dict[str, Any] = {"qv": np.asarray(query, dtype=np.float32), "limit": limit}
    if candidate_params:
        bind.update(candidate_params)
    rows = conn.execute(query_sql, bind, binary=True).fetchall()
    return [DenseHit(d, s) for d, s in rows]


@dataclass(frozen=True)
class RecallReport:
    """HNSW recall@k against exact search on a sample of queries."""

    k: int
    queries: int
    ef_search: int
    recall: float
    min_recall: float
    exact_ms_mean: float
    hnsw_ms_mean: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "queries": self.queries,
            "ef_search": self.ef_search,
            "recall": round(self.recall, 4),
            "min_recall": round(self.min_recall, 4),
            "exact_ms_mean": round(self.exact_ms_mean, 3),
            "hnsw_ms_mean": round(self.hnsw_ms_mean, 3),
        }


def hnsw_recall(
    conn: Connection[Any], queries: Sequence[Vector], *, k: int = 10, ef_search: int = 100
) -> RecallReport:
    """recall@k = |HNSW top-k ∩ exact top-k| / |exact top-k|, averaged over ``queries``.

    Requires the HNSW index to exist; each query runs in its own transaction.
    """
    if not has_hnsw(conn):
        raise RuntimeError("hnsw_recall: no HNSW index on embeddings (catalog below exact_below?)")
    recalls: list[float] = []
    exact_ms: list[float] = []
    hnsw_ms: list[float] = []
    for vec in queries:
        with conn.transaction():
            t0 = time.perf_counter()
            truth = search(conn, vec, limit=k, exact=True)
            t1 = time.perf_counter()
        with conn.transaction():
            t2 = time.perf_counter()
            approx = search(conn, vec, limit=k, exact=False, ef_search=ef_search)
            t3 = time.perf_counter()
        exact_ms.append((t1 - t0) * 1000)
        hnsw_ms.append((t3 - t2) * 1000)
        want = {h.doc_id for h in truth}
        if want:
            recalls.append(len(want & {h.doc_id for h in approx}) / len(want))
    arr = np.asarray(recalls or [0.0])
    return RecallReport(
        k=k,
        queries=len(recalls),
        ef_search=ef_search,
        recall=float(arr.mean()),
        min_recall=float(arr.min()),
        exact_ms_mean=float(np.mean(exact_ms)) if exact_ms else 0.0,
        hnsw_ms_mean=float(np.mean(hnsw_ms)) if hnsw_ms else 0.0,
    )
