"""Invariants over rankings of an unchanged target: known items, paraphrase churn, threshold
compliance, and the comparison of two rankings that the x402 filter-monotonicity family
(:mod:`pytest_searcheval.x402.invariants.monotonicity`) applies. Definitions:
docs/invariants.md."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_searcheval.collection.model import Collection, Query
from pytest_searcheval.domain import domain_of
from pytest_searcheval.invariants.base import (
    NOT_MUTABLE,
    InvariantOutcome,
    InvariantSettings,
    Searcher,
    Verdict,
    current_context,
    isolated_clone,
    profile_of,
    query_line,
    rank_of,
    show_ids,
    title_of,
)
from pytest_searcheval.targets import SearchTarget

# ------------------------------------------------------------------------------ 1 known items


def check_known_item(
    target: SearchTarget,
    coll: Collection,
    query: Query,
    doc_id: str,
    settings: InvariantSettings,
    max_rank: int | None = None,
) -> InvariantOutcome:
    """The known item of ``query`` is at rank <= max_rank."""
    bound = max_rank or settings.known_item_max_rank
    cid = f"known-item-stability-{query.id}"
    v = Verdict(cid, "known-item-stability", query_line(query, profile_of(settings)))
    search = Searcher(target, profile_of(settings), cache=True)
    ids = search(query.text, limit=max(settings.limit, bound)).ids
    rank = rank_of(ids, doc_id)
    v.details.update(query=query.id, doc=doc_id, rank=rank, max_rank=bound)
    if rank is None or rank > bound:
        where = f"at rank {rank}" if rank else f"not in the top {len(ids)}"
        v.fail(
            f"known item {doc_id!r} ({title_of(coll, doc_id)}) expected at rank <= {bound}, "
            f"found {where}",
            code="known-item",
            subject=doc_id,
        )
        v.note(f"ranked: {show_ids(ids)}")
    return v.done()


def check_known_items_reindex(
    target: SearchTarget,
    coll: Collection,
    items: Mapping[str, tuple[str, int | None]],
    settings: InvariantSettings,
) -> InvariantOutcome:
    """On an isolated clone: every known item at rank <= max_rank before a re-index is still
    there after it. Rank changes and top-k changes of the same queries are counted too."""
    cid = "known-item-stability-reindex"
    v = Verdict(cid, "known-item-stability", "known items across a re-index of unchanged content")
    queries = [coll.queries[q] for q in sorted(items) if q in coll.queries]
    if not queries:
        return v.skip("no query of the split has a known item")
    with isolated_clone(target) as clone:
        if clone is None:
            return v.skip(NOT_MUTABLE)
        search = Searcher(clone, profile_of(settings), cache=False)
        limit = max(settings.limit, settings.known_item_max_rank)
        before = {q.id: search(q.text, limit=limit).ids for q in queries}
        clone.reindex()
        after = {q.id: search(q.text, limit=limit).ids for q in queries}
    moved = 0
    topk_changed = 0
    for q in queries:
        doc_id, declared = items[q.id]
        bound = declared or settings.known_item_max_rank
        r0, r1 = rank_of(before[q.id], doc_id), rank_of(after[q.id], doc_id)
        if r0 != r1:
            moved += 1
        if before[q.id][: settings.churn_k] != after[q.id][: settings.churn_k]:
            topk_changed += 1
        if r0 is not None and r0 <= bound and (r1 is None or r1 > bound):
            v.fail(
                f"{query_line(q, profile_of(settings))}: known item {doc_id!r} "
                f"({title_of(coll, doc_id)}) "
                f"was at rank {r0} (<= {bound}) before the re-index, "
                f"{'at rank ' + str(r1) if r1 else 'absent'} after; "
                f"before: {show_ids(before[q.id], 3)}; after: {show_ids(after[q.id], 3)}",
                code="known-item-reindex",
                subject=f"{q.id}:{doc_id}",
            )
    v.details.update(queries=len(queries), rank_changed=moved, topk_changed=topk_changed)
    return v.done()


# ------------------------------------------------------------------------------ 2 churn


def check_paraphrase_churn(
    target: SearchTarget,
    coll: Collection,
    group: str,
    members: Sequence[Query],
    settings: InvariantSettings,
) -> InvariantOutcome:
    """Every pair of a paraphrase group: RBO(top-k, p) >= min_rbo and Jaccard@k >= min_jaccard.

    RBO is :func:`pytest_searcheval.metrics.rbo` (extrapolated) over the two top-k lists;
    Jaccard@k is :func:`pytest_searcheval.metrics.jaccard_at_k`.
    """
    from pytest_searcheval.metrics import jaccard_at_k, rbo

    cid = f"paraphrase-churn-{group}"
    k = settings.churn_k
    v = Verdict(
        cid,
        "paraphrase-churn",
        f"paraphrase group {group} ({', '.join(q.id for q in members)}; profile "
        f"{profile_of(settings)}): RBO(p={settings.churn_rbo_p:g}) >= {settings.churn_min_rbo:g} "
        f"and Jaccard@{k} >= {settings.churn_min_jaccard:g} expected",
    )
    search = Searcher(target, profile_of(settings), cache=True)
    tops = {q.id: search(q.text, limit=max(settings.limit, k)).ids[:k] for q in members}
    pairs: list[dict[str, Any]] = []
    rbos: list[float] = []
    jaccards: list[float] = []
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            r = rbo(tops[a.id], tops[b.id], p=settings.churn_rbo_p)
            j = jaccard_at_k(tops[a.id], tops[b.id], k)
            pairs.append({"a": a.id, "b": b.id, "rbo": round(r, 6), "jaccard": round(j, 6)})
            rbos.append(r)
            jaccards.append(j)
            if r < settings.churn_min_rbo or j < settings.churn_min_jaccard:
                v.fail(
                    f"{a.id} {a.text!r} vs {b.id} {b.text!r}: RBO {r:.4f}, Jaccard@{k} {j:.4f}",
                    code="churn",
                    subject=f"{a.id}:{b.id}",
                )
                v.note(f"{a.id} top {k}: {show_ids(tops[a.id], k)}")
                v.note(f"{b.id} top {k}: {show_ids(tops[b.id], k)}")
    v.details.update(
        group=group,
        pairs=pairs,
        min_rbo=round(min(rbos), 6) if rbos else None,
        min_jaccard=round(min(jaccards), 6) if jaccards else None,
    )
    return v.done()


# ------------------------------------------------------------------------------ 3 monotonicity


TIE = 1e-9  # scores closer than this are ties: either order is consistent with them


def _tied(scores: Mapping[str, float] | None, a: str, b: str) -> bool:
    if scores is None or a not in scores or b not in scores:
        return False
    return abs(scores[a] - scores[b]) <= TIE


def inversions(
    before: Sequence[str],
    after: Sequence[str],
    before_scores: Mapping[str, float] | None = None,
    after_scores: Mapping[str, float] | None = None,
) -> list[tuple[str, str]]:
    """Pairs (a, b) present in both lists with a above b in ``before`` and below it in
    ``after``. With scores, a pair tied (within 1e-9) in either answer is not an inversion:
    the ranking function declared the two equal, so either order is consistent with it."""
    pos = {d: i for i, d in enumerate(before)}
    common = [d for d in after if d in pos]
    out = []
    for i, a in enumerate(common):
        for b in common[i + 1 :]:
            if pos[a] > pos[b] and not (_tied(before_scores, a, b) or _tied(after_scores, a, b)):
                out.append((b, a))
    return out


def check_monotonic_step(
    wider: Sequence[str],
    narrower: Sequence[str],
    limit: int,
    wider_scores: Mapping[str, float] | None = None,
    narrower_scores: Mapping[str, float] | None = None,
) -> tuple[list[str], list[tuple[str, str]]]:
    """(added results, inverted pairs) of a step from a wider filter set to a narrower one.

    With W the wider answer and N the narrower one, both cut at ``limit``: when W was not full
    (``len(W) < limit``) W holds every listing the wider filters admit, so any ``d`` in N and not
    in W was added. When W was full, a listing absent from W ranked below all of W, so in N it
    must come after every listing that N shares with W; one that outranks a shared listing (with
    a strictly higher score, when scores are given) was added above it. Inverted pairs: see
    :func:`inversions`.
    """
    in_w = set(wider)
    added = []
    full = len(wider) >= limit
    for i, d in enumerate(narrower):
        if d in in_w:
            continue
        below = [x for x in narrower[i + 1 :] if x in in_w]
        if not full or any(not _tied(narrower_scores, d, x) for x in below):
            added.append(d)
    return added, inversions(wider, narrower, wider_scores, narrower_scores)


# ------------------------------------------------------------------------------ 4 thresholds


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def check_threshold_compliance(
    target: SearchTarget, coll: Collection, query: Query, settings: InvariantSettings
) -> InvariantOutcome:
    """One search with the query's labelled constraints as explicit filters (extraction on):

    * at most ``limit`` results, no id twice;
    * scores non-increasing down the ranking;
    * nothing returned when the response reports a no-result decision (``meta.no_result``), a
      confidence under its threshold (``meta.confidence = {value, threshold}``), and no result
      scored under a reported ``meta.score_threshold``;
    * with explicit filters: every id a document of the collection, every result satisfies the
      explicit filters and the filters the response says it applied (the collection's domain
      judges them: for x402 the independent oracle), and an unanswerable query
      (``expect.no_result`` or class ``no-result``) returns nothing.

    Without explicit filters the search is the query test's own request (its text, the
    profile, the limit, no filters). When the plugin's session selected that query's test (on
    every xdist worker alike) and its search did not error in this process, or the answer is
    the one a query test of this session judged (:meth:`Searcher.judged`), that test judges
    the answer's documents, applied filters and unanswerable expectation, and the case leaves
    them to it: one bad result is one failure, not two, whatever the order or the worker.
    Otherwise (the standalone API, a deselected or errored query test) the case checks them
    itself.
    """
    cid = f"threshold-compliance-{query.id}"
    v = Verdict(cid, "threshold-compliance", query_line(query, profile_of(settings)))
    domain = domain_of(coll)
    keys = domain.filter_keys if domain is not None else ()
    explicit = {k: val for k, val in query.constraints.items() if k in keys}
    search = Searcher(target, profile_of(settings), cache=True)
    response = search(query.text, limit=settings.limit, filters=explicit or None)
    ids = response.ids
    applied = {
        k: val for k, val in response.applied_filters.items() if k in keys and val is not None
    }
    if len(ids) > settings.limit:
        v.fail(f"{len(ids)} results for limit {settings.limit}", code="over-limit")
    dupes = sorted(d for d, n in Counter(ids).items() if n > 1)
    if dupes:
        v.fail(f"ids returned more than once: {', '.join(dupes)}", code="duplicate-ids")
    # An answer a query test of this session judged: what that test checks of the result
    # (unknown documents, the applied filters, the unanswerable expectation) is its own.
    own = bool(explicit) or not (
        current_context().query_test_judges(query.id)
        or search.judged(query.text, limit=settings.limit)
    )
    for rank, d in enumerate(ids if own else (), start=1):
        doc = coll.documents.get(d)
        if doc is None:
            v.fail(
                f"rank {rank}: {d!r} is not a document of the collection",
                code="unknown-document",
                subject=d,
            )
            continue
        for label, filters in (("requested", explicit), ("applied", applied)):
            if filters and domain is not None:
                for reason in domain.violations(doc, filters, coll):
                    v.fail(
                        f"rank {rank}: {d} breaks the {label} filters: {reason}",
                        code="filter-violation",
                        subject=d,
                    )
    scores = [h.score for h in response.hits]
    for rank in range(1, len(scores)):
        if scores[rank] > scores[rank - 1] + 1e-9:
            v.fail(
                f"scores increase from rank {rank} ({scores[rank - 1]:.6g}) to rank "
                f"{rank + 1} ({scores[rank]:.6g})",
                code="scores-increase",
            )
    meta = response.meta
    if meta.get("no_result") is True and ids:
        v.fail(
            f"the response reports no_result but returns {len(ids)} result(s)",
            code="no-result-with-results",
        )
    confidence = meta.get("confidence")
    if isinstance(confidence, Mapping):
        value, tau = _number(confidence.get("value")), _number(confidence.get("threshold"))
        if value is not None and tau is not None and value < tau and ids:
            v.fail(
                f"confidence {value:.6g} < threshold {tau:.6g} but {len(ids)} result(s)",
                code="under-threshold",
            )
    floor = _number(meta.get("score_threshold"))
    if floor is not None:
        for rank, s in enumerate(scores, start=1):
            if s < floor:
                v.fail(
                    f"rank {rank}: score {s:.6g} < reported score_threshold {floor:.6g}",
                    code="under-score-threshold",
                )
    if own and query.unanswerable and ids:
        v.fail(
            f"unanswerable query returned {len(ids)} result(s); expected none",
            code="unanswerable-answered",
        )
    if v.problems:
        v.note(f"ranked: {show_ids(ids)}")
        if explicit or applied:
            v.note(
                f"requested filters: {json.dumps(explicit, sort_keys=True)}; applied: "
                f"{json.dumps(applied, sort_keys=True, default=str)}"
            )
    v.details.update(query=query.id, returned=len(ids), unanswerable=query.unanswerable)
    return v.done()
