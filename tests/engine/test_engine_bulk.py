"""Bulk writes (``Engine.upsert_many`` / ``delete_many``) against the same writes one at a time:
the filter-conformance setup (every shipped listing outside the conformance set tombstoned, the
conformance listings upserted), then every conformance case, shipped query and profile answers
the same ids with the same scores, and the in-memory catalog (duplicate groups, stuffing
penalties, first-indexed order, tombstones) is the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine.core import Engine
from pytest_searcheval.invariants.catalog import record_of
from pytest_searcheval.x402.conformance import load_conformance

ROOT = Path(__file__).resolve().parents[2]


def _answers(eng: Engine, texts: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    out = []
    for text, filters in texts:
        for profile in ("lexical", "semantic", "hybrid"):
            body = eng.search(text, profile=profile, limit=50, filters=filters, extract=False)
            out.append([(r["id"], r["score"]) for r in body["results"]])
    return out


def test_bulk_writes_equal_the_same_writes_one_by_one(engine: Engine, shipped: Collection) -> None:
    conf = load_conformance(ROOT / "conformance", shipped.assets, check_oracle=False)
    gone = [d for d in sorted(shipped.documents) if d not in conf.documents]
    records = [record_of(conf.documents[d]) for d in sorted(conf.documents)]
    assert len(gone) > 400 and len(records) >= 20
    texts = [(c.query, dict(c.filters)) for c in conf.cases]
    texts += [(q.text, {}) for q in list(shipped.queries.values())[:40]]

    one = engine.clone()
    bulk = engine.clone()
    try:
        for doc_id in gone:
            one.delete(doc_id)
        for record in records:
            one.upsert(record)
        assert sorted(bulk.delete_many(gone + gone[:3])) == gone  # already gone: not again
        bulk.upsert_many(records)
        a, b = one.catalog, bulk.catalog
        assert a.tombstones == b.tombstones == set(gone)
        assert a.seq == b.seq and a.stuffing == b.stuffing and a.priors == b.priors
        assert a.groups.rep == b.groups.rep and dict(a.groups.links) == dict(b.groups.links)
        answered = _answers(one, texts)
        assert answered == _answers(bulk, texts)
        assert sum(bool(x) for x in answered) > 100  # the comparison is not vacuous
    finally:
        one.close()
        bulk.close()


def test_a_repeated_id_in_one_batch_keeps_the_last_record(
    engine: Engine, shipped: Collection
) -> None:
    first = next(iter(shipped.documents.values()))
    record = record_of(first)
    copy = engine.clone()
    try:
        copy.upsert_many(
            [
                {**record, "title": "An Older Title About Tides"},
                {**record, "title": "The Newest Title About Glaciers"},
            ]
        )
        assert copy.catalog.docs[first.id].title == "The Newest Title About Glaciers"
        body = copy.search("glaciers", profile="lexical", limit=5)
        assert body["results"] and body["results"][0]["id"] == first.id
        tides = copy.search("tides older", profile="lexical", limit=50, apply_threshold=False)
        assert first.id not in [r["id"] for r in tides["results"]]
    finally:
        copy.close()
