"""The evaluation without pytest: search a target, score each answer, explain a failure.

The plugin drives it from its hooks and generated tests; anything else may drive it the same
way::

    from pytest_searcheval.evaluation import Evaluation, evaluate_query, fill_measures

    evaluation = Evaluation(cfg)                 # a SearchEvalConfig
    rows = {q.id: evaluate_query(evaluation, target, q) for q in evaluation.selected_queries()}
    fill_measures(evaluation, rows)              # every configured measure, per profile

- :class:`Evaluation` (``session``): settings, collection, baseline, the target's facts and
  profiles, the cached and timed answers;
- ``scoring``: :func:`evaluate_query` (one row per query), :func:`score_profile`,
  :func:`measure_one`, :func:`fill_measures`, :func:`relevant_count`;
- ``expectations``: :func:`check_expectations`;
- ``failure``: :func:`format_failure`, the triage message;
- ``resolution``: :func:`resolve_profiles`, :func:`resolve_relevance`, :func:`at_depth`.
"""

from __future__ import annotations

from pytest_searcheval.evaluation.expectations import check_expectations
from pytest_searcheval.evaluation.failure import SHOWN_RESULTS, format_failure
from pytest_searcheval.evaluation.resolution import (
    apply_resolution,
    at_depth,
    resolve_profiles,
    resolve_relevance,
)
from pytest_searcheval.evaluation.scoring import (
    evaluate_query,
    fill_measures,
    measure_one,
    relevant_count,
    score_profile,
)
from pytest_searcheval.evaluation.session import Evaluation

__all__ = [
    "SHOWN_RESULTS",
    "Evaluation",
    "apply_resolution",
    "at_depth",
    "check_expectations",
    "evaluate_query",
    "fill_measures",
    "format_failure",
    "measure_one",
    "relevant_count",
    "resolve_profiles",
    "resolve_relevance",
    "score_profile",
]
