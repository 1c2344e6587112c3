"""The no-result decision: confidence features of a ranking and the profile's rule over them.

The features are maxima over the candidates that survived every restriction (hard filters,
tombstones), so a tighter filter can only lower them and never turn a no-result into an answer:

- ``cos``: the best cosine of the dense list (None when the profile has no dense list);
- ``coverage``: the best share of the query's idf that one lexical candidate matches (None
  when the profile has no lexical list);
- ``rerank``: the best cross-encoder score among the surviving reranked head (None: no head).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    found: Features, rule: NoResultRule | None, *, apply_threshold: bool, empty: bool
) -> Decision:
    """No result when the ranking is ``empty`` or (``apply_threshold``) the rule suppresses it."""
    args = (found.cos, found.coverage, found.rerank)
    confidence = rule.confidence(*args) if rule is not None else None
    no_result = bool(apply_threshold and rule is not None and rule.suppress(*args))
    return Decision(found, rule, confidence, no_result or empty)
