"""BM25F from the in-memory postings (engine/postings.py), what every catalog ranks from,
against the SQL statement that defines it (engine/bm25.py): the same documents, order, rounded
scores and idf on the shipped catalog, with hard filters, after upserts, a delete and a
re-index, below and at or above ``exact_below``, and through the engine's lexical profile; and
the hard-filter check of HNSW catalogs (x402.matches against x402.to_sql, the same listings for
every shipped constraint and every single filter value)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from embedding_doubles import HashEmbedder

from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine import bm25, index, restrict, x402
from pytest_searcheval.engine.core import Engine, EngineSettings
from pytest_searcheval.engine.dense import DenseParams
from pytest_searcheval.engine.postings import pg_round9, pg_round9_array


def _above(size: int) -> EngineSettings:
    return EngineSettings(no_result={}, dense=DenseParams(exact_below=size), recall_sample=0)


@pytest.fixture(scope="module")
def kept(pg_server: Any, shipped: Collection, tmp_path_factory: Any) -> Iterator[Engine]:
    """The same catalog at or above ``exact_below``: it keeps its postings in memory."""
    embedder = HashEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    with Engine.start(shipped, dsn=pg_server.dsn, settings=_above(100), embedder=embedder) as eng:
        assert eng.hnsw and len(eng.catalog.postings) == len(shipped.documents)
        yield eng


def both(
    eng: Engine, text: str, limit: int, applied: x402.Filters | None = None
) -> tuple[tuple[list[bm25.LexicalHit], float], tuple[list[bm25.LexicalHit], float]]:
    terms = index.query_terms(text)
    candidates, params = restrict.candidate_query(applied) if applied else (None, {})
    with eng.schema.connection() as conn, conn.transaction():
        sql_side = bm25.search(
            conn,
            terms,
            eng.settings.bm25,
            n_docs=len(eng.catalog),
            limit=limit,
            candidates=candidates,
            candidate_params=params,
        )
    allowed = (
        restrict.every_satisfying(applied, catalog=eng.catalog, assets=eng.assets)
        if applied
        else None
    )
    memory_side = eng.catalog.postings.search(
        terms, eng.settings.bm25, n_docs=len(eng.catalog), limit=limit, allowed=allowed
    )
    return sql_side, memory_side


def assert_same(
    sql_side: tuple[list[bm25.LexicalHit], float],
    memory_side: tuple[list[bm25.LexicalHit], float],
    what: str,
) -> None:
    __tracebackhide__ = True
    (sql_hits, sql_idf), (mem_hits, mem_idf) = sql_side, memory_side
    assert [(h.doc_id, h.score) for h in mem_hits] == [(h.doc_id, h.score) for h in sql_hits], what
    assert [h.matched_idf for h in mem_hits] == pytest.approx(
        [h.matched_idf for h in sql_hits], rel=1e-12
    ), what
    assert mem_idf == pytest.approx(sql_idf, rel=1e-12), what


@pytest.mark.parametrize("limit", [10, 1000])
def test_every_shipped_query_ranks_the_same(kept: Engine, shipped: Collection, limit: int) -> None:
    matched = 0
    for query in shipped.queries.values():
        sql_side, memory_side = both(kept, query.text, limit)
        assert_same(sql_side, memory_side, f"{query.id} {query.text!r} limit {limit}")
        matched += bool(sql_side[0])
    assert matched > 150  # the comparison is not vacuous


def test_hard_filters_restrict_both_alike(kept: Engine, shipped: Collection) -> None:
    compared = 0
    for query in shipped.queries.values():
        if not query.constraints:
            continue
        applied = x402.parse_filters(query.constraints, shipped.assets)
        sql_side, memory_side = both(kept, query.text, 50, applied)
        assert_same(sql_side, memory_side, f"{query.id} {query.constraints}")
        compared += 1
    assert compared >= 20


def test_writes_keep_both_alike(kept: Engine, shipped: Collection) -> None:
    queries = [q.text for q in list(shipped.queries.values())[:60]]
    copy = kept.clone()
    try:
        first = next(iter(shipped.documents.values()))
        record = {
            "id": first.id,
            "title": first.title + " forecast weather translation",
            "text": "Now about currency exchange rates and geocoding addresses.",
            "fields": first.fields,
            "x402": first.x402,
            "sidecar": first.sidecar,
        }
        copy.upsert(record)  # a changed listing: its old postings must drop out
        copy.upsert({**record, "id": "brand-new-listing", "title": "Brand New Weather Radar"})
        copy.delete(list(shipped.documents)[5])  # a tombstone still counts in the statistics
        for text in queries:
            assert_same(*both(copy, text, 200), f"after writes: {text!r}")
        copy.reindex()
        for text in queries:
            assert_same(*both(copy, text, 200), f"after reindex: {text!r}")
    finally:
        copy.close()


def sql_lexical(
    eng: Engine, q: str, limit: int, filters: dict[str, str] | None = None
) -> list[tuple[str, float]]:
    """The lexical profile's answer as the SQL statement ranks it: the query's text and hard
    filters as the engine reads them, BM25F in SQL, tombstones dropped, cut at ``limit``."""
    query = restrict.constraints(q, filters, extract=True, assets=eng.assets)
    candidates, params = restrict.candidate_query(query.applied)
    gone = eng.catalog.tombstones
    with eng.schema.connection() as conn, conn.transaction():
        hits, _ = bm25.search(
            conn,
            index.query_terms(query.text),
            eng.settings.bm25,
            n_docs=len(eng.catalog),
            limit=limit + len(gone),
            candidates=candidates,
            candidate_params=params,
        )
    return [(h.doc_id, round(h.score, 6)) for h in hits if h.doc_id not in gone][:limit]


def assert_engine_ranks_as_sql(eng: Engine, shipped: Collection, what: str) -> None:
    __tracebackhide__ = True
    compared = filtered = 0
    for query in shipped.queries.values():
        for limit in (3, 20):
            got = eng.search(query.text, profile="lexical", limit=limit, apply_threshold=False)
            want = sql_lexical(eng, query.text, limit)
            assert [(r["id"], r["score"]) for r in got["results"]] == want, (what, query.id)
        compared += 1
        filtered += bool(got["filters"]["applied"])
    assert compared == len(shipped.queries) and filtered >= 20  # filters were compared too


def assert_ranks_as_sql(eng: Engine, text: str, filters: dict[str, str] | None = None) -> None:
    __tracebackhide__ = True
    got = eng.search(text, profile="lexical", limit=20, filters=filters, apply_threshold=False)
    want = sql_lexical(eng, text, 20, filters)
    assert want, f"{text!r} {filters}: the comparison is not vacuous"
    assert [(r["id"], r["score"]) for r in got["results"]] == want, (text, filters)


def one_more_listing(shipped: Collection) -> dict[str, Any]:
    """A new listing with the first shipped listing's payment options and fields."""
    first = next(iter(shipped.documents.values()))
    return {
        "id": "one-more-listing",
        "title": "Marine Weather Forecast by Coordinates",
        "text": "Wind, swell and tide forecasts for any latitude and longitude.",
        "fields": first.fields,
        "x402": first.x402,
        "sidecar": first.sidecar,
    }


def test_the_engine_ranks_as_the_sql_below_exact_below(engine: Engine, shipped: Collection) -> None:
    assert not engine.hnsw and len(engine.catalog.postings) == len(shipped.documents)
    assert_engine_ranks_as_sql(engine, shipped, "exact-scan catalog")


def test_the_engine_ranks_as_the_sql_at_or_above_exact_below(
    kept: Engine, shipped: Collection
) -> None:
    assert_engine_ranks_as_sql(kept, shipped, "HNSW catalog")


def test_postings_follow_every_write_below_exact_below(engine: Engine, shipped: Collection) -> None:
    """A catalog below the size keeps its postings current through upserts (a tombstoned
    listing's stay, as its SQL rows do until ``reindex``) and a re-index, and ranks as the SQL
    does after each."""
    copy = engine.clone()
    try:
        assert not copy.hnsw and len(copy.catalog.postings) == len(shipped.documents)
        gone = list(shipped.documents)[7]
        copy.delete(gone)
        first = next(iter(shipped.documents.values()))
        copy.upsert(one_more_listing(shipped))
        assert not copy.hnsw and len(copy.catalog.postings) == len(shipped.documents) + 1
        assert gone in copy.catalog.postings.slot_of
        # A replaced listing: its old words must stop finding it, its new ones find it once.
        network = str(first.x402["accepts"][0]["network"])  # type: ignore[index]
        old_words = first.title
        assert_ranks_as_sql(copy, old_words)
        assert_ranks_as_sql(copy, old_words, {"network": network})  # fills the filter memo
        replaced = {
            "id": first.id,
            "title": "Tide Table Oracle",
            "text": "High and low water times for harbours, with swell and wind.",
            "fields": first.fields,
            "x402": first.x402,
            "sidecar": first.sidecar,
        }
        # ... and a new listing that passes the memoised filter: the memo must not hide it.
        copy.upsert_many([replaced, {**replaced, "id": "harbour-tides", "title": "Harbour Tides"}])
        for text in (old_words, "tide table oracle harbours", "marine weather forecast"):
            assert_same(*both(copy, text, 200), f"after replacing {first.id}: {text!r}")
            assert_ranks_as_sql(copy, text)
            assert_ranks_as_sql(copy, text, {"network": network})
        hits = copy.search("tide table oracle", profile="lexical", limit=20)["results"]
        assert [r["id"] for r in hits].count(first.id) == 1
        filtered = copy.search(
            "harbour tides", profile="lexical", limit=20, filters={"network": network}
        )["results"]
        assert "harbour-tides" in [r["id"] for r in filtered]
        texts = [q.text for q in list(shipped.queries.values())[:80]]
        for text in [*texts, "marine weather forecast"]:
            assert_same(*both(copy, text, 200), f"after writes: {text!r}")
        assert_engine_ranks_as_sql(copy, shipped, "after writes")
        copy.reindex()  # the tombstone goes; the two new listings stay
        assert len(copy.catalog.postings) == len(copy.catalog) == len(shipped.documents) + 1
        assert gone not in copy.catalog.postings.slot_of
        for text in texts:
            assert_same(*both(copy, text, 200), f"after reindex: {text!r}")
    finally:
        copy.close()


def test_crossing_exact_below_keeps_the_postings(
    pg_server: Any, shipped: Collection, tmp_path: Path
) -> None:
    """The upsert that takes a catalog to the size builds the HNSW index beside the postings
    it already keeps; the re-index that takes it below drops the index, not the postings."""
    size = len(shipped.documents) + 1
    embedder = HashEmbedder(cache_dir=tmp_path)
    with Engine.start(shipped, dsn=pg_server.dsn, settings=_above(size), embedder=embedder) as eng:
        assert not eng.hnsw and len(eng.catalog.postings) == len(shipped.documents)
        eng.upsert(one_more_listing(shipped))
        assert eng.hnsw and len(eng.catalog.postings) == size
        for text in [q.text for q in list(shipped.queries.values())[:40]]:
            assert_same(*both(eng, text, 200), f"after reaching the size: {text!r}")
        eng.delete("one-more-listing")
        eng.reindex()
        assert not eng.hnsw and len(eng.catalog.postings) == len(shipped.documents)
        assert_engine_ranks_as_sql(eng, shipped, "after a re-index below the size")


def test_rounding_is_postgresqls(engine: Engine) -> None:
    values = [1.0000000005, 2.4999999995, 0.1234567895, 7.0000000004999999, 12.3456789049999]
    values += [k * 1e-9 + 5e-10 for k in range(1, 2000, 37)]
    values += [19.123456789 + k * 1.1e-10 for k in range(40)]
    with engine.schema.connection() as conn:
        rows = conn.execute(
            "SELECT round(v::numeric, 9)::float8 FROM unnest(%s::float8[]) v", (values,)
        ).fetchall()
    assert [pg_round9(v) for v in values] == [r[0] for r in rows]
    assert pg_round9_array(np.asarray(values)).tolist() == [r[0] for r in rows]


def test_vector_rounding_is_postgresqls_on_bm25_like_scores(engine: Engine) -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.random(3000) * 40, rng.random(1000) * 0.01])
    with engine.schema.connection() as conn:
        rows = conn.execute(
            "SELECT round(v::numeric, 9)::float8 FROM unnest(%s::float8[]) v", (values.tolist(),)
        ).fetchall()
    assert pg_round9_array(values).tolist() == [r[0] for r in rows]


def test_the_in_memory_filter_check_agrees_with_the_sql(
    engine: Engine, shipped: Collection
) -> None:
    """Searches check hard filters in memory (x402.matches) against the catalog version they
    serve: every listing at once on exact-scan catalogs, the candidates on HNSW ones. Both
    agree with the SQL predicate on the committed rows."""
    combos: list[dict[str, str]] = [
        q.constraints for q in shipped.queries.values() if q.constraints
    ]
    options = [o for d in shipped.documents.values() for o in (d.x402 or {}).get("accepts", [])]
    for key, values in (
        ("network", {o["network"] for o in options}),
        ("scheme", {o["scheme"] for o in options}),
        ("asset", {a.code for a in shipped.assets}),
        ("type", {"http", "mcp"}),
        ("max_price_usd", {"0", "0.0001", "0.001", "0.005", "0.01", "0.1", "1", "2"}),
        ("recipient", {o["payTo"] for o in options[:40]}),
        ("extension", {"bazaar"}),
    ):
        combos += [{key: v} for v in sorted(values)]
    combos += [{"network": "stellar:testnet", "asset": "USDC", "max_price_usd": "0.01"}]
    ids = list(engine.catalog.docs)
    nonempty = 0
    for combo in combos:
        applied = x402.parse_filters(combo, shipped.assets)
        want = restrict.sql_satisfying(applied, schema=engine.schema)
        every = restrict.every_satisfying(applied, catalog=engine.catalog, assets=engine.assets)
        got = restrict.satisfying(
            applied, ids, catalog=engine.catalog, exact=False, assets=engine.assets
        )
        assert got == set(want) and every == want, combo
        nonempty += bool(want) and len(want) < len(ids)
    assert nonempty >= 30
