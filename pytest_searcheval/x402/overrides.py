"""Judged pairs forced to grade 0 because the listing breaks the query's labelled hard
constraints (per the independent oracle)."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_searcheval.collection.model import (
    Collection,
)
from pytest_searcheval.x402 import oracle as _constraints


@dataclass(frozen=True, slots=True)
class Override:
    """A judged pair forced to grade 0 because the listing breaks the query's constraints."""

    query_id: str
    doc_id: str
    original_grade: int
    reasons: tuple[str, ...]


def apply_constraint_overrides(
    collection: Collection,
) -> tuple[dict[str, dict[str, int]], list[Override]]:
    """New judgments where every judged pair whose listing violates the query's labelled hard
    constraints (per the independent oracle, ``constraints.violations``) has grade 0, and the
    list of pairs changed (grade > 0 before). The collection itself is not modified."""
    new = {q: dict(docs) for q, docs in collection.judgments.items()}
    overrides: list[Override] = []
    for qid in sorted(new):
        query = collection.queries.get(qid)
        if query is None or not query.constraints:
            continue
        for did in sorted(new[qid]):
            grade = new[qid][did]
            doc = collection.documents.get(did)
            if grade <= 0 or doc is None:
                continue
            reasons = _constraints.violations(doc, query.constraints, collection.assets)
            if reasons:
                new[qid][did] = 0
                overrides.append(Override(qid, did, grade, tuple(reasons)))
    return new, overrides
