"""The profile pipelines: one query through the engine, step by step.

1. :func:`check`: the profile exists and can serve, the limit is in range;
2. :func:`plan`: constraints (explicit and extracted filters), list depth, candidate sub-query;
3. :func:`retrieve`: the lexical and dense lists (concurrently for fused profiles);
4. :func:`order`: the profile's ordering (one list as is, or fusion, the adversarial
   corrections and the cross-encoder head for the fused ones);
5. :func:`restrict`: hard filters (fused profiles) and tombstones remove listings;
6. the no-result decision over what survived (engine/decision.py);
7. :func:`respond`: the ``/discovery/search`` body.

Every step reads one catalog version (engine/catalog.py), taken once by :func:`plan`: the
postings ranked, the title index, priors, penalties and duplicate groups, the hard-filter check
and the body served all belong to it, however the admin writes meanwhile. Only the dense list
comes from SQL, from the rows committed when it runs (at most the writes not yet published
ahead of the version): :func:`restrict_ranking` drops an id the version does not hold and
checks every result's hard filters against the version's body.

Fusion is rank-based, so fused profiles rank over the UNFILTERED catalog and the filters
restrict the fused list afterwards (a filter can only remove). Pointwise scores (BM25F with
collection-wide statistics, cosine) do not depend on the candidate set, so the single-list
profiles restrict their list as it is ranked (the dense scan in SQL, BM25F to the listings
that pass), which is already a pure restriction.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Set
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_searcheval.engine import bm25, decision, dense, fusion, index, restrict
from pytest_searcheval.engine.documents import embedding_text, rerank_text, resource_body
from pytest_searcheval.engine.rerank import rerank_head
from pytest_searcheval.engine.settings import MAX_LIMIT, PROFILES, ProfileUnavailable

if TYPE_CHECKING:
    from psycopg import sql

    from pytest_searcheval.engine.catalog import Catalog
    from pytest_searcheval.engine.core import Engine

Ranking = list[tuple[str, float]]


@dataclass(frozen=True)
class Plan:
    profile: str
    limit: int
    query: restrict.Constraints
    #: how deep each list is ranked
    depth: int
    #: the catalog version this search reads from start to end
    catalog: Catalog
    #: whether dense search walks the HNSW graph, as it was when the search started
    hnsw: bool
    #: the hard filters as a sub-query of candidate ids (single-list profiles only)
    candidates: sql.Composable | None = None
    candidate_params: dict[str, Any] = field(default_factory=dict)

    @property
    def lexical(self) -> bool:
        return self.profile != "semantic"

    @property
    def dense(self) -> bool:
        return self.profile != "lexical"

    @property
    def fused(self) -> bool:
        return self.profile in ("hybrid", "hybrid_rerank")


@dataclass(frozen=True)
class Lists:
    """The retrieved lists; an absent one is empty."""

    lexical: list[bm25.LexicalHit]
    total_idf: float
    dense: list[dense.DenseHit]

    def keep(self, allowed: Any) -> Lists:
        """Only the hits whose id ``allowed`` contains."""
        return replace(
            self,
            lexical=[h for h in self.lexical if h.doc_id in allowed],
            dense=[h for h in self.dense if h.doc_id in allowed],
        )

    def drop(self, gone: Set[str]) -> Lists:
        return replace(
            self,
            lexical=[h for h in self.lexical if h.doc_id not in gone],
            dense=[h for h in self.dense if h.doc_id not in gone],
        )


def run(
    engine: Engine,
    q: str,
    *,
    profile: str,
    limit: int,
    filters: Mapping[str, Any] | None,
    extract: bool,
    apply_threshold: bool = True,
    explain: bool = False,
) -> dict[str, Any]:
    """The response to one query; raises ``ProfileUnavailable`` / ``ValueError``.
    ``explain``: every result row gets its ``explanation`` (engine/explain.py)."""
    started = time.perf_counter()
    catalog = engine.catalog  # the one read: every step below uses this version
    check(engine, profile, limit, catalog)
    p = plan(
        engine, q, profile=profile, limit=limit, filters=filters, extract=extract, catalog=catalog
    )
    retrieved = lists = retrieve(engine, p)
    ranked, head_scores = order(engine, p, lists)
    candidates = len(ranked)
    ranked, lists = restrict_ranking(engine, p, ranked, lists)
    if starved(engine, p, retrieved, ranked):
        p = replace(p, depth=max(p.depth, engine.settings.fusion.deep_candidate_depth))
        retrieved = lists = retrieve(engine, p)
        ranked, head_scores = order(engine, p, lists)
        candidates = len(ranked)
        ranked, lists = restrict_ranking(engine, p, ranked, lists)
    found = decision.features(
        lexical=lists.lexical if p.lexical else None,
        total_idf=lists.total_idf,
        dense_hits=lists.dense,
        ranked=ranked,
        head_scores=head_scores,
    )
    rule = (engine.settings.no_result or {}).get(profile)
    made = decision.decide(
        found,
        rule,
        apply_threshold=apply_threshold,
        empty=not ranked,
        candidates=candidates,
        filtered=bool(p.query.applied),
    )
    body = respond(engine, q, p, ranked, made, started)
    if explain:
        from pytest_searcheval.engine import explain as explanation

        explanation.attach(engine, p, retrieved, head_scores, body["results"])
    return body


def starved(engine: Engine, p: Plan, retrieved: Lists, ranked: Ranking) -> bool:
    """A fused query on an HNSW catalog that restrictions left with fewer than its limit while
    a list was cut at the candidate depth: worth ranking again from the deep depth."""
    if not (p.fused and p.hnsw) or len(ranked) >= p.limit:
        return False
    if p.depth >= engine.settings.fusion.deep_candidate_depth:
        return False
    restricted = bool(p.query.applied) or bool(p.catalog.tombstones)
    cut = len(retrieved.lexical) >= p.depth or len(retrieved.dense) >= p.depth
    return restricted and cut


def check(engine: Engine, profile: str, limit: int, catalog: Catalog | None = None) -> None:
    if profile not in PROFILES:
        raise ValueError(f"profile: expected one of {', '.join(PROFILES)}, got {profile!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit: expected an integer in [1, {MAX_LIMIT}], got {limit!r}")
    reason = engine.profiles(catalog)[profile]
    if reason is not None:
        raise ProfileUnavailable(f"profile {profile} is unavailable: {reason}")


def plan(
    engine: Engine,
    q: str,
    *,
    profile: str,
    limit: int,
    filters: Mapping[str, Any] | None,
    extract: bool,
    catalog: Catalog | None = None,
) -> Plan:
    """``catalog``: the version to search (by default the engine's current one)."""
    query = restrict.constraints(q, filters, extract=extract, assets=engine.assets)
    catalog = engine.catalog if catalog is None else catalog
    hnsw = engine.hnsw
    if profile in ("hybrid", "hybrid_rerank"):
        # Exact scan: every document with any signal; HNSW: the documented candidate depth.
        depth = len(catalog) if not hnsw else engine.settings.fusion.candidate_depth
        depth = max(depth, limit, engine.settings.rerank_depth, 1)
        return Plan(profile, limit, query, depth, catalog, hnsw)
    candidates, params = restrict.candidate_query(query.applied)
    depth = limit + len(catalog.tombstones)
    return Plan(profile, limit, query, depth, catalog, hnsw, candidates, params)


def retrieve(engine: Engine, p: Plan) -> Lists:
    text = p.query.text

    def lexical() -> tuple[list[bm25.LexicalHit], float]:
        # BM25F from the in-memory postings (engine/postings.py): the formula, rounding and tie
        # order of the SQL statement in engine/bm25.py, which reads every posting's heap page
        # (shipped catalog, depth 525: 0.29 ms instead of 4.6 ms per query; 100k listings:
        # 3.8 ms instead of 250 ms median, docs/performance.md).
        terms = index.query_terms(text)
        # N is the version's own: every indexed row, tombstoned ones too, as the SQL's.
        postings = p.catalog.postings
        n_docs = len(postings)

        def best(k: int, allowed: Any = None) -> tuple[list[bm25.LexicalHit], float]:
            return postings.search(
                terms, engine.settings.bm25, n_docs=n_docs, limit=k, allowed=allowed
            )

        if p.candidates is None:
            return best(p.depth)
        if not p.hnsw:
            # Hard filters (single-list profiles) on an exact-scan catalog: the listings that
            # pass (memoised per filter combination and version), ranked in one pass.
            allowed = restrict.every_satisfying(
                p.query.applied, catalog=p.catalog, assets=engine.assets
            )
            return best(p.depth, allowed)
        # HNSW catalogs: the predicate is checked for the best-ranked listings, four times
        # more of them each round, until depth of them pass; the order is the unfiltered one,
        # so the first depth that pass are what the SQL filter returns.
        k = 4 * p.depth
        while True:
            hits, total = best(k)
            ok = restrict.satisfying(
                p.query.applied,
                [h.doc_id for h in hits],
                catalog=p.catalog,
                exact=False,
                assets=engine.assets,
            )
            kept = [h for h in hits if h.doc_id in ok]
            if len(kept) >= p.depth or len(hits) < k:
                return kept[: p.depth], total
            k *= 4

    lex: list[bm25.LexicalHit] = []
    total_idf = 0.0
    sem: list[dense.DenseHit] = []
    pending: Future[tuple[list[bm25.LexicalHit], float]] | None = None
    if p.lexical and p.dense:
        # The lexical list is ranked on a pool thread while this thread encodes the query
        # (torch releases the GIL), so a cache miss costs max(encode, lexical), not the sum.
        pending = engine.lexical_pool.submit(lexical)
    elif p.lexical:
        lex, total_idf = lexical()
    if p.dense:
        qvec = engine.embedder.embed_one(text)
        if qvec is not None:
            with engine.schema.connection(bounded=True) as conn, conn.transaction():
                sem = dense.search(
                    conn,
                    qvec,
                    limit=p.depth,
                    exact=not p.hnsw,
                    ef_search=min(max(engine.settings.dense.ef_search, p.depth), 1000),
                    candidates=p.candidates,
                    candidate_params=p.candidate_params,
                )
    if pending is not None:
        lex, total_idf = pending.result()
    return Lists(lex, total_idf, sem)


def order(engine: Engine, p: Plan, lists: Lists) -> tuple[Ranking, dict[str, float]]:
    """(the profile's ranking, head id -> the reranking model's score for ``hybrid_rerank``)."""
    if p.profile == "lexical":
        return [(h.doc_id, h.score) for h in lists.lexical], {}
    if p.profile == "semantic":
        return [(h.doc_id, h.score) for h in lists.dense], {}
    scores = fusion.rrf_scores(
        {
            "lexical": [h.doc_id for h in lists.lexical],
            "semantic": [h.doc_id for h in lists.dense],
        },
        engine.settings.fusion,
        p.catalog.priors,
        depth=p.depth,
        title_match=title_match(engine, p, lists),
        coverage=lexical_coverage(lists),
    )
    ranked = fusion.best_first(adversarial(engine, p.catalog, scores))
    if p.profile != "hybrid_rerank":
        return ranked, {}
    docs = p.catalog.docs
    depth = engine.settings.rerank_depth
    text_of = embedding_text if engine.reranker.reads == "embedding" else rerank_text
    passages = {d: text_of(docs[d]) for d, _ in ranked[:depth] if d in docs}
    return rerank_head(
        engine.reranker, p.query.text, ranked, passages, depth=depth, mix=engine.settings.rerank_mix
    )


def lexical_coverage(lists: Lists) -> dict[str, float]:
    """Each lexical candidate's share of the query's idf (the no-result ``coverage``)."""
    total = lists.total_idf
    return {h.doc_id: (h.matched_idf / total if total > 0 else 0.0) for h in lists.lexical}


def title_match(engine: Engine, p: Plan, lists: Lists) -> dict[str, float] | None:
    if not engine.settings.fusion.title_weight:
        return None
    titles, text = p.catalog.titles, p.query.text
    if not p.hnsw:
        return titles.match(text)
    # HNSW catalogs: only the head of each candidate list (a common title word would
    # otherwise make the index walk most of a large catalog).
    top = engine.settings.fusion.title_depth
    return titles.match_among(
        text, [h.doc_id for h in lists.lexical[:top]] + [h.doc_id for h in lists.dense[:top]]
    )


def adversarial(engine: Engine, catalog: Catalog, scores: dict[str, float]) -> dict[str, float]:
    """Stuffing penalty, then near-duplicate collapse (engine/dedup.py) of the fused scores;
    both pointwise in the listing, applied before any restriction so that filters and deletes
    only remove. ``scores`` is changed in place; the result is ranked once, afterwards (a
    listing without a penalty keeps its score exactly: ``s * (1 - w * 0) == s``)."""
    params = engine.settings.dedup
    if params.stuffing_weight > 0:
        weight = params.stuffing_weight
        for d, penalty in catalog.penalized.items():
            if d in scores:
                scores[d] *= 1.0 - weight * penalty
    if params.collapse:
        scores = catalog.groups.collapse_scores(scores)
    return scores


def restrict_ranking(
    engine: Engine, p: Plan, ranked: Ranking, lists: Lists
) -> tuple[Ranking, Lists]:
    """Ids the version does not hold (the dense list's SQL may see a listing a write committed
    and has not published yet), hard filters, then tombstones. The filters are checked
    against the version's bodies for every profile: the single lists were restricted as they
    were ranked, the dense one by SQL on the rows committed then, which a write may have
    changed since the version was taken."""
    catalog = p.catalog
    if p.dense:
        docs = catalog.docs
        ranked = [(d, s) for d, s in ranked if d in docs]
        lists = replace(lists, dense=[h for h in lists.dense if h.doc_id in docs])
    applied = p.query.applied
    if applied:
        allowed = restrict.satisfying(
            applied,
            [d for d, _ in ranked],
            catalog=catalog,
            exact=not p.hnsw,
            assets=engine.assets,
        )
        ranked = [(d, s) for d, s in ranked if d in allowed]
        lists = lists.keep(allowed)
    gone = catalog.tombstones
    if gone:
        ranked = [(d, s) for d, s in ranked if d not in gone]
        lists = lists.drop(gone)
    return ranked, lists


def respond(
    engine: Engine,
    q: str,
    p: Plan,
    ranked: Ranking,
    made: decision.Decision,
    started: float,
) -> dict[str, Any]:
    docs = p.catalog.docs
    results = (
        []
        if made.no_result
        else [
            {"id": d, "score": round(s, 6), "resource": resource_body(docs[d])}
            for d, s in ranked[: p.limit]
            if d in docs
        ]
    )
    return {
        "query": q,
        "profile": p.profile,
        "results": results,
        "filters": {"applied": p.query.applied.to_dict(), "extracted": p.query.extracted},
        "no_result": made.no_result,
        "why_empty": made.why,
        "confidence": made.as_dict(),
        "model": engine.model_info(),
        "latency_ms": round((time.perf_counter() - started) * 1000.0, 3),
    }
