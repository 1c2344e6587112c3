"""Why a listing ranks where it does: the terms of its score, on request (``explain=true``).

For each returned listing, what the profile's ordering used (docs/engine.md gives the
formulas):

* ``lexical`` / ``semantic``: its rank (from 1) and score in each list the profile ranks, or
  null when the list does not hold it. Fused profiles rank both lists over the unfiltered
  catalog, so these are the ranks fusion saw, before filters and deletions removed anything;
* fused profiles add ``rrf`` (each list's weighted reciprocal rank, ``w * c / (k + rank)``,
  ``c`` the listing's ``lexical_credit`` for the lexical list: its coverage of the query's idf
  to the fusion's coverage_power, times the lexical gate; 1 for the semantic list),
  ``title_boost`` (``title_weight * boost(title match)``), ``prior`` (``eps * prior(d)``, the
  liveness and settlement signal), ``stuffing_penalty`` (the factor ``1 - weight * penalty``
  the fused score was multiplied by) and, for ``hybrid_rerank``, ``rerank`` (the
  cross-encoder's score when the listing was in the reranked head). A fused score is
  ``(sum of rrf + title_boost + prior) * stuffing_penalty``; a listing that stands for its
  near-duplicate group (``duplicates``: the members collapsed into it) carries the group's
  best score, which may be a member's.

Computed only when asked for, after the answer is complete, so it costs nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_searcheval.engine.core import Engine
    from pytest_searcheval.engine.search import Lists, Plan

__all__ = ["attach"]


def _positions(hits: Sequence[Any], wanted: set[str]) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for rank, hit in enumerate(hits, start=1):
        if hit.doc_id in wanted and hit.doc_id not in out:
            out[hit.doc_id] = (rank, hit.score)
            if len(out) == len(wanted):
                break
    return out


def attach(
    engine: Engine,
    p: Plan,
    lists: Lists,
    head_scores: Mapping[str, float],
    results: list[dict[str, Any]],
) -> None:
    """Add ``explanation`` to every row of ``results`` (the response's result rows); ``lists``
    are the lists as retrieved, before any restriction."""
    if not results:
        return
    from pytest_searcheval.engine import fusion
    from pytest_searcheval.engine.search import lexical_coverage, title_match
    from pytest_searcheval.engine.title import boost

    wanted = {str(row["id"]) for row in results}
    lexical = _positions(lists.lexical, wanted) if p.lexical else {}
    semantic = _positions(lists.dense, wanted) if p.dense else {}
    params = engine.settings.fusion
    titles = title_match(engine, p, lists) if p.fused else None
    coverage = lexical_coverage(lists)
    lexical_gate = fusion.gate(params, max(coverage.values(), default=0.0))
    dedup = engine.settings.dedup
    # fusion.rrf counts each list down to max(params.depth, the plan's depth)
    cut = max(params.depth, p.depth)
    groups: dict[str, list[str]] = {}
    if p.fused and dedup.collapse:
        for member, rep in p.catalog.groups.rep.items():
            if rep in wanted and member != rep:
                groups.setdefault(rep, []).append(member)
    for row in results:
        doc_id = str(row["id"])
        why: dict[str, Any] = {}
        if p.lexical:
            why["lexical"] = _entry(lexical.get(doc_id))
        if p.dense:
            why["semantic"] = _entry(semantic.get(doc_id))
        if p.fused:
            credit = (
                coverage.get(doc_id, 0.0) ** params.coverage_power
                if params.coverage_power > 0
                else 1.0
            )
            weights = {
                "lexical": params.weights.get("lexical", 0.0) * lexical_gate * credit,
                "semantic": params.weights.get("semantic", 0.0),
            }
            why["rrf"] = {
                name: _rrf(weights[name], params.k, ranks.get(doc_id), cut)
                for name, ranks in (("lexical", lexical), ("semantic", semantic))
            }
            why["lexical_credit"] = round(lexical_gate * credit, 6)
            match = (titles or {}).get(doc_id)
            why["title_boost"] = (
                round(params.title_weight * boost(match, params.title_threshold), 6)
                if match is not None and params.title_weight
                else 0.0
            )
            prior = p.catalog.priors.get(doc_id, 0.0)
            why["prior"] = round(params.prior_eps * prior, 6)
            penalty = p.catalog.stuffing.get(doc_id, 0.0)
            why["stuffing_penalty"] = round(1.0 - dedup.stuffing_weight * penalty, 6)
            if dedup.collapse:
                why["duplicates"] = sorted(groups.get(doc_id, ()))
            if p.profile == "hybrid_rerank":
                score = head_scores.get(doc_id)
                why["rerank"] = None if score is None else round(score, 6)
        row["explanation"] = why


def _entry(found: tuple[int, float] | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"rank": found[0], "score": round(found[1], 6)}


def _rrf(weight: float, k: int, found: tuple[int, float] | None, cut: int) -> float:
    if found is None or found[0] > cut or weight <= 0:
        return 0.0
    return round(weight / (k + found[0]), 6)
