"""Set-level measures: they score result lists (``{query id: [doc id, ...]}`` in rank order, as
returned), not graded rankings, so they live apart from :func:`evaluate`'s kernel."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def _top(ranking: Sequence[str], k: int | None, what: str) -> list[str]:
    if isinstance(ranking, str):
        raise ValueError(f"{what}: expected a list of document ids, got a string")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
        raise ValueError(f"{what}: k must be a positive integer, got {k!r}")
    top = list(ranking if k is None else ranking[:k])
    if len(set(top)) != len(top):
        dup = next(d for i, d in enumerate(top) if d in top[:i])
        raise ValueError(f"{what}: duplicate document id {dup!r}")
    return top


@dataclass(frozen=True)
class NoResultAccuracy:
    """Behaviour on unanswerable queries, and the price paid on answerable ones.

    ``accuracy`` = correct_empty / unanswerable (queries that should return nothing and did);
    ``false_empty_rate`` = false_empty / answerable (queries with an answer that returned
    nothing). Either is NaN when its denominator is 0.
    """

    unanswerable: int
    correct_empty: int
    accuracy: float
    answerable: int
    false_empty: int
    false_empty_rate: float


def no_result_accuracy(
    results: Mapping[str, Sequence[str]], unanswerable: Collection[str]
) -> NoResultAccuracy:
    """Score the empty-result decision: ``results`` maps every evaluated query id to the ids it
    returned (an empty list = no result); ``unanswerable`` holds the ids of the queries that
    must return nothing (a subset of ``results``' keys). Every other query is answerable."""
    missing = [q for q in unanswerable if q not in results]
    if missing:
        raise ValueError(f"no_result_accuracy: query {missing[0]!r} has no result list")
    un = set(unanswerable)
    correct = sum(1 for q in un if len(_top(results[q], None, f"query {q!r}")) == 0)
    answerable = [q for q in results if q not in un]
    false_empty = sum(1 for q in answerable if len(results[q]) == 0)
    return NoResultAccuracy(
        unanswerable=len(un),
        correct_empty=correct,
        accuracy=correct / len(un) if un else math.nan,
        answerable=len(answerable),
        false_empty=false_empty,
        false_empty_rate=false_empty / len(answerable) if answerable else math.nan,
    )


@dataclass(frozen=True)
class Violation:
    """A returned document that breaks an applied hard filter (rank is 1-based)."""

    query_id: str
    doc_id: str
    rank: int


def hard_filter_violations(
    results: Mapping[str, Sequence[str]], violates: Callable[[str, str], bool]
) -> list[Violation]:
    """Every (query, returned document) for which ``violates(query_id, doc_id)`` is true.

    The predicate comes from the caller (the independent constraint oracle applied to the
    filters in force for that query), so this module stays free of filter semantics. The
    hard-filter violation count is ``len()`` of the result; the gate requires 0.
    """
    out: list[Violation] = []
    for qid, ranking in results.items():
        for i, doc in enumerate(_top(ranking, None, f"query {qid!r}")):
            if violates(qid, doc):
                out.append(Violation(qid, doc, i + 1))
    return out


def grade0_rate_at_k(
    qrels: Mapping[str, Mapping[str, int]], results: Mapping[str, Sequence[str]], k: int
) -> float:
    """Share of the shown top-k results that were judged and found useless, pooled over queries.

    grade0_rate@k = (number of top-k results with a judged grade <= 0) / (number of top-k
    results returned), summed over every query in ``results`` before dividing, so a query that
    returns 10 results weighs ten times one that returns 1. Unjudged results count in the
    denominator only (Judged@k says how many there are). NaN when nothing was returned.
    """
    bad = shown = 0
    for qid, ranking in results.items():
        judged = qrels.get(qid, {})
        top = _top(ranking, k, f"grade0_rate_at_k: query {qid!r}")
        shown += len(top)
        bad += sum(1 for d in top if d in judged and judged[d] <= 0)
    return bad / shown if shown else math.nan


def adversarial_top1_rate(
    results: Mapping[str, Sequence[str]], adversarial: Collection[str]
) -> float:
    """Share of the queries in ``results`` whose first result is an adversarial listing.

    ``adversarial`` is the set of document ids flagged adversarial (keyword stuffing, near
    duplicates). Queries that returned nothing count in the denominator (their top-1 is not
    adversarial). NaN for an empty ``results``. Lower is better.
    """
    if not results:
        return math.nan
    adv = set(adversarial)
    hits = sum(1 for r in results.values() if len(r) > 0 and r[0] in adv)
    return hits / len(results)


def adversarial_resistance_rate(
    results: Mapping[str, Sequence[str]], pairs: Mapping[str, Sequence[tuple[str, str]]]
) -> float:
    """Share of (genuine, adversarial) pairs where the genuine listing ranks above its copy.

    ``pairs`` maps a query id to its (genuine doc id, adversarial doc id) pairs. A pair is
    resisted when the genuine document is returned and the adversarial one is either not
    returned or ranked below it; a missing genuine document is never resisted. Pooled over all
    pairs of all queries; NaN when there are none. Higher is better.
    """
    total = resisted = 0
    for qid, qpairs in pairs.items():
        ranking = _top(results.get(qid, []), None, f"adversarial_resistance_rate: query {qid!r}")
        pos = {d: i for i, d in enumerate(ranking)}
        for genuine, adv in qpairs:
            total += 1
            g = pos.get(genuine)
            a = pos.get(adv)
            if g is not None and (a is None or g < a):
                resisted += 1
    return resisted / total if total else math.nan


@dataclass(frozen=True)
class Concentration:
    """Provider concentration of the top-k, averaged over queries with at least one result.

    Per query, with s_p the share of the top-k results held by provider p:
    ``top_share`` = max_p s_p (1.0 = one provider holds every slot) and
    ``hhi`` = sum_p s_p^2 (Herfindahl-Hirschman index on the 0-1 scale; 1/n for n distinct
    providers each holding one slot). ``queries`` is the number of queries averaged.
    """

    top_share: float
    hhi: float
    queries: int


def provider_concentration(
    results: Mapping[str, Sequence[str]], provider_of: Mapping[str, str], k: int
) -> Concentration:
    """Concentration of providers in each query's top ``k`` (see :class:`Concentration`).

    ``provider_of`` maps every returned document id to its provider name; a returned document
    without a provider is a ValueError naming it. Queries that returned nothing are skipped;
    with no query left both means are NaN.
    """
    shares: list[float] = []
    hhis: list[float] = []
    for qid, ranking in results.items():
        top = _top(ranking, k, f"provider_concentration: query {qid!r}")
        if not top:
            continue
        counts: dict[str, int] = {}
        for d in top:
            if d not in provider_of:
                raise ValueError(
                    f"provider_concentration: query {qid!r}, document {d!r}: no provider"
                )
            counts[provider_of[d]] = counts.get(provider_of[d], 0) + 1
        n = len(top)
        shares.append(max(counts.values()) / n)
        hhis.append(sum((c / n) ** 2 for c in counts.values()))
    if not shares:
        return Concentration(math.nan, math.nan, 0)
    return Concentration(float(np.mean(shares)), float(np.mean(hhis)), len(shares))


def jaccard_at_k(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """Jaccard@k = |A_k & B_k| / |A_k | B_k| of the top-k id sets; 1.0 when both are empty."""
    ta = set(_top(a, k, "jaccard_at_k: first ranking"))
    tb = set(_top(b, k, "jaccard_at_k: second ranking"))
    union = ta | tb
    return len(ta & tb) / len(union) if union else 1.0


def rbo(a: Sequence[str], b: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap RBO_ext (Webber, Moffat and Zobel, "A similarity measure
    for indefinite rankings", ACM TOIS 28(4), 2010, equation 32, which handles lists of
    different lengths).

    With S the shorter list (length s), L the longer (length l), X_d = |S_{:d} & L_{:d}| the
    overlap at depth d (for d > s, S contributes only its s items) and A_d = X_d / d::

        RBO_ext = (1-p)/p * (sum_{d=1}^{l} X_d/d p^d + sum_{d=s+1}^{l} X_s (d-s)/(s d) p^d)
                  + ((X_l - X_s)/l + X_s/s) p^l

    1.0 for identical lists, 0.0 for disjoint ones; two empty lists give 1.0 and one empty list
    gives 0.0. ``p`` in (0, 1) is the persistence (0.9 puts about 86% of the weight on the top
    10). Raises ValueError on duplicate ids.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"rbo: p must be in (0, 1), got {p!r}")
    la = _top(a, None, "rbo: first ranking")
    lb = _top(b, None, "rbo: second ranking")
    short, long_ = (la, lb) if len(la) <= len(lb) else (lb, la)
    s, ln = len(short), len(long_)
    if ln == 0:
        return 1.0
    if s == 0:
        return 0.0
    seen_s: set[str] = set()
    seen_l: set[str] = set()
    overlap = 0
    x = np.zeros(ln + 1)
    for d in range(1, ln + 1):
        dl = long_[d - 1]
        if d <= s:
            ds = short[d - 1]
            if ds == dl:
                overlap += 1
            else:
                overlap += (ds in seen_l) + (dl in seen_s)
            seen_s.add(ds)
        elif dl in seen_s:
            overlap += 1
        seen_l.add(dl)
        x[d] = overlap
    depth = np.arange(1, ln + 1, dtype=np.float64)
    weights = p**depth
    total = float(np.sum(x[1:] / depth * weights))
    tail = depth[s:]
    total += float(np.sum(x[s] * (tail - s) / (s * tail) * weights[s:]))
    return float((1.0 - p) / p * total + ((x[ln] - x[s]) / ln + x[s] / s) * p**ln)
