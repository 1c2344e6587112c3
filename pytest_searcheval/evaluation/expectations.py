"""The declared expectations of a query (known item, max rank, must include, no result)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_searcheval.reasons import Reason

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Query


def check_expectations(query: Query, ids: Sequence[str]) -> list[Reason]:
    """Unmet declared expectations (known_item, max_rank, must_include, no_result)."""
    expect = query.expect
    unmet: list[Reason] = []
    known = expect.get("known_item")
    # Only a query that names documents reads its whole ranking (a run file's is 1,000 ids).
    position = (
        {doc_id: rank for rank, doc_id in enumerate(ids, start=1)}
        if known or expect.get("must_include")
        else {}
    )
    max_rank = int(expect.get("max_rank") or 1)
    if known:
        rank = position.get(str(known))
        if rank is None or rank > max_rank:
            found = f"at rank {rank}" if rank else f"not in the top {len(ids)}"
            unmet.append(
                Reason(
                    "known-item",
                    f"known item {known!r} expected at rank <= {max_rank}, found {found}",
                    str(known),
                    {"rank": rank, "max_rank": max_rank},
                )
            )
    for doc_id in expect.get("must_include") or []:
        rank = position.get(str(doc_id))
        limit = max_rank if (expect.get("max_rank") and not known) else len(ids)
        if rank is None or rank > limit:
            unmet.append(
                Reason(
                    "must-include",
                    f"must include {doc_id!r} in the top {limit}, found rank {rank}",
                    str(doc_id),
                    {"rank": rank, "limit": limit},
                )
            )
    if query.unanswerable and ids:
        unmet.append(
            Reason(
                "unanswerable-answered",
                f"unanswerable query returned {len(ids)} results (expected none)",
                params={"returned": len(ids)},
            )
        )
    return unmet
