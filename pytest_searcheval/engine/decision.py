"""The no-result decision: confidence features of a ranking and the profile's rule over them.

The features are maxima over the candidates that survived every restriction (hard filters,
tombstones), so a tighter filter can only lower them and never turn a no-result into an answer:

- ``cos``: the best cosine of the dense list (None when the profile has no dense list);
- ``coverage``: the best share of the query's idf that one lexical candidate matches (None
  when the profile has no lexical list);
- ``rerank``: the best reranking-model score among the surviving reranked head (None: no head).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_searcheval.engine.bm25 import LexicalHit
from pytest_searcheval.engine.dense import DenseHit
from pytest_searcheval.engine.threshold import NoResultRule


@dataclass(frozen=True)
class Features:
    cos: float | None
    coverage: float | None
    rerank: float | None


def features(
    *,
    lexical: Sequence[LexicalHit] | None,
    total_idf: float,
    dense_hits: Sequence[DenseHit],
    ranked: Sequence[tuple[str, float]],
    head_scores: Mapping[str, float],
) -> Features:
    """``lexical`` is None for a profile without a lexical list."""
    cos = max((h.score for h in dense_hits), default=None)
    coverage = None
    if lexical is not None:
        best = max((h.matched_idf for h in lexical), default=0.0)
        coverage = best / total_idf if total_idf > 0 else 0.0
    # other profiles than hybrid_rerank have no head and skip the pass over the ranked list
    rerank = (
        max((head_scores[d] for d, _ in ranked if d in head_scores), default=None)
        if head_scores
        else None
    )
    return Features(cos, coverage, rerank)


@dataclass(frozen=True)
class Decision:
    features: Features
    rule: NoResultRule | None
    confidence: float | None
    no_result: bool
    #: why the answer is empty (None when it is not): see :func:`why_empty`
    why: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The response's ``confidence`` object."""
        f = self.features
        return {
            "cos": None if f.cos is None else round(f.cos, 6),
            "coverage": None if f.coverage is None else round(f.coverage, 6),
            "rerank": None if f.rerank is None else round(f.rerank, 6),
            "value": (
                None
                if self.confidence is None or not math.isfinite(self.confidence)
                else round(self.confidence, 6)
            ),
            "threshold": None if self.rule is None else self.rule.tau,
        }


def decide(
    found: Features,
    rule: NoResultRule | None,
    *,
    apply_threshold: bool,
    empty: bool,
    candidates: int | None = None,
    filtered: bool = False,
) -> Decision:
    """No result when the ranking is ``empty`` or (``apply_threshold``) the rule suppresses it.

    ``candidates``: how many listings the profile ranked before hard filters and deletions;
    ``filtered``: whether hard filters applied (they explain an empty answer when the ranking
    had candidates)."""
    args = (found.cos, found.coverage, found.rerank)
    confidence = rule.confidence(*args) if rule is not None else None
    suppressed = bool(apply_threshold and rule is not None and rule.suppress(*args))
    made = Decision(found, rule, confidence, suppressed or empty)
    if not made.no_result:
        return made
    return replace(made, why=why_empty(made, empty=empty, candidates=candidates, filtered=filtered))


def rule_text(rule: NoResultRule) -> str:
    """The rule as the response states it, e.g. ``1 * cos + 0 * coverage < 0.308``."""
    terms = [f"{rule.w_cos:g} * cos", f"{rule.w_cov:g} * coverage"]
    if rule.w_rerank:
        terms.append(f"{rule.w_rerank:g} * rerank")
    return " + ".join(terms) + f" < {rule.tau:g}"


def why_empty(
    made: Decision, *, empty: bool, candidates: int | None, filtered: bool
) -> dict[str, Any]:
    """The response's ``why_empty``: a ``reason`` code, the ``rule`` when it decided, the
    ``evidence`` (the features and the counts) and a sentence.

    Reasons, first match wins: ``no-candidates`` (the profile found no listing at all),
    ``filtered-out`` (listings matched, none satisfies the hard filters), ``removed`` (the
    only matches were deleted), ``below-threshold`` (the best surviving evidence is under
    the profile's no-result rule: the catalog has nothing that serves the need)."""
    f = made.features
    evidence: dict[str, Any] = {
        "cos": None if f.cos is None else round(f.cos, 6),
        "coverage": None if f.coverage is None else round(f.coverage, 6),
        "rerank": None if f.rerank is None else round(f.rerank, 6),
        "candidates": candidates,
    }
    if empty and not candidates:
        reason = "no-candidates"
        message = (
            "no listing that satisfies the hard filters matches the query"
            if filtered
            else "no listing matches any term or vector of the query"
        )
    elif empty and filtered:
        reason = "filtered-out"
        message = f"{candidates} listing(s) matched the query; none satisfies the hard filters"
    elif empty:
        reason = "removed"
        message = f"the {candidates} listing(s) that matched have been deleted"
    else:
        reason = "below-threshold"
        assert made.rule is not None
        value = made.confidence
        shown = "-inf" if value is None or not math.isfinite(value) else f"{value:.3f}"
        message = (
            f"confidence {shown} is under the no-result threshold {made.rule.tau:g}: the best "
            "surviving listing is too far from the query to serve it"
        )
    return {
        "reason": reason,
        "rule": None if reason != "below-threshold" or made.rule is None else rule_text(made.rule),
        "evidence": evidence,
        "message": message,
    }
