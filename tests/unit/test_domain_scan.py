"""Which domain a collection belongs to, found once per documents mapping: a query test asks
for every query, and a generic corpus of 200,000 documents took 0.08 s a scan."""

from __future__ import annotations

import pytest

from pytest_searcheval import domain
from pytest_searcheval.collection.model import Collection, Document


def test_the_documents_are_scanned_once_until_their_number_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans: list[int] = []
    original = domain.named

    def counted(manifest, documents):  # type: ignore[no-untyped-def]
        scans.append(1)
        return original(manifest, documents)

    monkeypatch.setattr(domain, "named", counted)
    docs = {f"d{i}": Document(f"d{i}", "t", "x") for i in range(1000)}
    coll = Collection(documents=docs, queries={}, judgments={})
    assert [domain.domain_name(coll) for _ in range(3)] == [None, None, None]
    assert len(scans) == 1
    docs["p1"] = Document("p1", "paid", "x", x402={"accepts": []})  # a record: x402's
    assert domain.domain_name(coll) == "x402" and len(scans) == 2
    assert domain.domain_name(coll) == "x402" and len(scans) == 2
    # another mapping of the same documents is scanned for itself; a declared domain wins
    other = Collection(documents=dict(docs), queries={}, judgments={})
    assert domain.domain_name(other) == "x402" and len(scans) == 3
    declared = Collection(documents=docs, queries={}, judgments={}, manifest={"domain": "x"})
    assert domain.domain_name(declared) == "x" and len(scans) == 3
