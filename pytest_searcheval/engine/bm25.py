"""BM25F computed in PostgreSQL from the postings tables.

Variant: Robertson & Zaragoza's "simple BM25F" (The Probabilistic Relevance Framework: BM25 and
Beyond, 2009, eq. 3.18-3.21), per-field length normalisation, saturation applied once after the
weighted sum over fields::

    tf~(t, d) = sum_f  w_f * tf(t, d, f) / (1 - b_f + b_f * len(d, f) / avglen_f)
    score(q, d) = sum_{t in q}  qtf(t) * idf(t) * tf~(t, d) * (k1 + 1) / (k1 + tf~(t, d))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))          (Lucene's non-negative idf)

``df(t)`` counts documents that contain ``t`` in any field, ``N`` counts indexed documents,
``avglen_f`` averages over documents that have field ``f``. Because saturation comes after the
field sum, repeating a term in one field (keyword stuffing) or across fields cannot push a
term's contribution beyond ``idf * (k1 + 1)``: stuffing saturates.

Tables (engine/migrations/0001_core.sql): postings ``terms(doc_id, field, term, tf)``,
``doc_lengths(doc_id, field, len)``, ``field_stats(field, doc_count, total_len)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from psycopg import Connection, sql

from pytest_searcheval.engine.index import FIELDS


@dataclass(frozen=True)
class BM25FParams:
    """Lexical ranking parameters. ``weights`` and ``b`` are per field (see ``index.FIELDS``)."""

    k1: float = 1.2
    weights: Mapping[str, float] = field(
        default_factory=lambda: {"title": 3.0, "text": 1.0, "meta": 1.5, "url": 1.0, "tool": 2.0}
    )
    b: Mapping[str, float] = field(
        default_factory=lambda: {"title": 0.5, "text": 0.75, "meta": 0.5, "url": 0.3, "tool": 0.3}
    )

    def __post_init__(self) -> None:
        if self.k1 < 0:
            raise ValueError(f"BM25FParams.k1: expected >= 0, got {self.k1}")
        for name, value in self.b.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"BM25FParams.b[{name!r}]: expected 0 <= b <= 1, got {value}")
        for name, value in self.weights.items():
            if value < 0:
                raise ValueError(f"BM25FParams.weights[{name!r}]: expected >= 0, got {value}")

    def field_arrays(self) -> tuple[list[str], list[float], list[float]]:
        names = [f for f in FIELDS if self.weights.get(f, 0.0) > 0]
        return names, [self.weights[f] for f in names], [self.b.get(f, 0.75) for f in names]


class LexicalHit(NamedTuple):
    # A tuple: a hybrid query on an exact-scan catalog builds one per matching document.
    doc_id: str
    score: float
    matched_idf: float


def idf(n_docs: int, df: int) -> float:
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def document_frequencies(conn: Connection[Any], terms: Sequence[str]) -> dict[str, int]:
    rows = conn.execute(
        "SELECT term, count(DISTINCT doc_id) FROM terms WHERE term = ANY(%s) GROUP BY term",
        (list(terms),),
    ).fetchall()
    return {str(t): int(n) for t, n in rows}


# Scores are rounded to 1e-9: a float sum's last bits depend on the order the plan aggregates
# in, which changes with the plan (e.g. after autovacuum's ANALYZE); unrounded, equal scores
# would tie-break differently from one call to the next and rank-based fusion would reorder.
# The postings of the query terms are MATERIALIZED first (index scan on terms(term, field)),
# so the planner never starts from doc_lengths and walks every document.
_SCORE_SQL = """
WITH q(term, qtf, idf) AS (
    SELECT * FROM unnest(%(terms)s::text[], %(qtf)s::float8[], %(idf)s::float8[])
), s AS MATERIALIZED (
    SELECT w.field, w.weight, w.b,
           GREATEST(fs.total_len::float8 / NULLIF(fs.doc_count, 0), 1e-9) AS avg_len
    FROM unnest(%(fields)s::text[], %(weights)s::float8[], %(bs)s::float8[]) AS w(field, weight, b)
    JOIN field_stats fs ON fs.field = w.field
), p AS MATERIALIZED (
    SELECT t.doc_id, t.field, t.term, t.tf
    FROM terms t
    WHERE t.term = ANY(%(terms)s::text[]) {candidate_filter}
), tf AS (
    SELECT p.doc_id, p.term,
           sum(s.weight * p.tf / (1 - s.b + s.b * dl.len / s.avg_len)) AS wtf
    FROM p
    JOIN s ON s.field = p.field
    JOIN doc_lengths dl ON dl.doc_id = p.doc_id AND dl.field = p.field
    GROUP BY p.doc_id, p.term
)
SELECT tf.doc_id,
       round(sum(q.qtf * q.idf * tf.wtf * (%(k1)s + 1) / (%(k1)s + tf.wtf))::numeric, 9)::float8
           AS score,
       sum(q.idf) AS matched_idf
FROM tf JOIN q ON q.term = tf.term
GROUP BY tf.doc_id
ORDER BY score DESC, tf.doc_id COLLATE "C"
LIMIT %(limit)s
"""


def search(
    conn: Connection[Any],
    query_tf: Mapping[str, int],
    params: BM25FParams,
    *,
    n_docs: int,
    limit: int,
    candidates: sql.Composable | None = None,
    candidate_params: Mapping[str, Any] | None = None,
    df_cache: MutableMapping[str, int] | None = None,
) -> tuple[list[LexicalHit], float]:
    """Top ``limit`` documents by BM25F and the total idf of the query terms.

    ``candidates`` is an optional SQL query returning a column ``doc_id`` (the hard-filter
    predicate); only those documents are scored. The second return value (sum of idf over
    distinct query terms, unseen terms at df = 0) is the denominator of lexical coverage.
    ``df_cache`` memoises document frequencies; the caller clears it whenever the index changes.
    """
    if not query_tf or n_docs == 0:
        total = sum(idf(n_docs, 0) for _ in query_tf)
        return [], total
    terms = sorted(query_tf)
    if df_cache is None:
        dfs = document_frequencies(conn, terms)
    else:
        unknown = [t for t in terms if t not in df_cache]
        if unknown:
            found = document_frequencies(conn, unknown)
            for t in unknown:
                df_cache[t] = found.get(t, 0)
        dfs = {t: df_cache[t] for t in terms}
    idfs = [idf(n_docs, dfs.get(t, 0)) for t in terms]
    total_idf = float(sum(idfs))
    present = [i for i, t in enumerate(terms) if dfs.get(t, 0) > 0]
    if not present:
        return [], total_idf
    fields, weights, bs = params.field_arrays()
    candidate_filter: sql.Composable = sql.SQL("")
    if candidates is not None:
        candidate_filter = sql.SQL("AND t.doc_id IN ({})").format(candidates)
    query = sql.SQL(_SCORE_SQL).format(candidate_filter=candidate_filter)
    bind: dict[str, Any] = {
        "terms": [terms[i] for i in present],
        "qtf": [float(query_tf[terms[i]]) for i in present],
        "idf": [idfs[i] for i in present],
        "fields": fields,
        "weights": weights,
        "bs": bs,
        "k1": params.k1,
        "limit": limit,
    }
    if candidate_params:
        bind.update(candidate_params)
    rows = conn.execute(query, bind, binary=True).fetchall()
    hits = [LexicalHit(d, s, m) for d, s, m in rows]
    return hits, total_idf
