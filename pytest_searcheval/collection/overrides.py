"""Judged pairs forced to grade 0 because the document breaks the query's labelled hard
constraints, as the collection's domain judges them (the x402 oracle for x402 listings)."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_searcheval.collection.model import Collection
from pytest_searcheval.domain import domain_of


@dataclass(frozen=True, slots=True)
class Override:
    """A judged pair forced to grade 0 because the document breaks the query's constraints."""

    query_id: str
    doc_id: str
    original_grade: int
    reasons: tuple[str, ...]


def apply_constraint_overrides(
    collection: Collection,
) -> tuple[dict[str, dict[str, int]], list[Override]]:
    """New judgments where every judged pair whose document violates the query's labelled hard
    constraints has grade 0, and the list of pairs changed (grade > 0 before). The collection
    itself is not modified; a collection without a domain has no hard constraints to break."""
    new = {q: dict(docs) for q, docs in collection.judgments.items()}
    overrides: list[Override] = []
    domain = domain_of(collection)
    if domain is None:
        return new, overrides
    for qid in sorted(new):
        query = collection.queries.get(qid)
        if query is None or not query.constraints:
            continue
        for did in sorted(new[qid]):
            grade = new[qid][did]
            doc = collection.documents.get(did)
            if grade <= 0 or doc is None:
                continue
            reasons = domain.violations(doc, query.constraints, collection)
            if reasons:
                new[qid][did] = 0
                overrides.append(Override(qid, did, grade, tuple(reasons)))
    return new, overrides
