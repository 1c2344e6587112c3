"""Per-query relevance measures and set-level measures, pure numpy.

Every measure is computed from one flat, vectorised representation of the input: for each
(query, judged document) pair its grade and its 0-based rank in the run (or "not retrieved")
(``packing``); the kernels (``kernels.Calc``) compute each measure for every query at once.

Measures are named as ir_measures names them: ``nDCG@k``, ``nDCG``, ``P@k``, ``R@k``, ``RR``,
``RR@k``, ``AP``, ``AP@k``, ``bpref`` (or ``Bpref``), ``Rprec``, ``Success@k``, ``ERR@k``,
``ERR``, ``infAP``, ``Judged@k``; a binary measure may set its own relevance level,
``P(rel=2)@5`` (``registry``). Each measure's docstring (``measures``) is its definition.
Conventions (see :func:`manifest` and docs/metrics.md):

* ranking: a ``{doc: score}`` run is ordered by score descending, ties by doc id descending
  (trec_eval's order); a ``[doc, ...]`` run is taken in the given order;
* gain: ``2**g - 1`` ("exp", default) or ``g`` ("linear", trec_eval); grades <= 0 have gain 0;
  the ideal ranking holds every judged document with grade > 0, sorted by grade, cut at k;
* binary measures (P, R, RR, AP, bpref, Rprec, Success, infAP) call a document relevant when
  grade >= relevance level (the run's, or the measure's ``rel=N``);
* unjudged documents are non-relevant; bpref skips them; documents with a negative grade are
  non-relevant and, in bpref, treated as unjudged (trec_eval);
* a query in the qrels but absent from the run is an empty ranking (trec_eval ``-c``);
  a query in the run but not in the qrels is ignored;
* a query without relevant documents: ``NaN`` for every relevance measure by default (it is
  left out of :func:`aggregate` and scored by no-result accuracy instead), ``0.0`` in
  ``trec_compat`` mode (what trec_eval prints).

A measure of one's own: ``@measure("Name", cutoff="optional")`` on ``fn(calc, k) -> (values,
undefined)``, where ``calc`` is a :class:`Calc`.
"""

from __future__ import annotations

from pytest_searcheval.metrics.kernels import Calc, _Calc
from pytest_searcheval.metrics.registry import (
    REGISTRY,
    Measure,
    MeasureDef,
    label,
    measure,
    parse_measure,
    with_depth,
)
from pytest_searcheval.metrics.scoring import (
    GAINS,
    aggregate,
    aggregate_counts,
    evaluate,
    manifest,
)
from pytest_searcheval.metrics.setlevel import (
    Concentration,
    NoResultAccuracy,
    Violation,
    adversarial_resistance_rate,
    adversarial_top1_rate,
    grade0_rate_at_k,
    hard_filter_violations,
    jaccard_at_k,
    no_result_accuracy,
    provider_concentration,
    rbo,
)

__all__ = [
    "GAINS",
    "REGISTRY",
    "Calc",
    "Concentration",
    "Measure",
    "MeasureDef",
    "NoResultAccuracy",
    "Violation",
    "_Calc",
    "adversarial_resistance_rate",
    "adversarial_top1_rate",
    "aggregate",
    "aggregate_counts",
    "evaluate",
    "grade0_rate_at_k",
    "hard_filter_violations",
    "jaccard_at_k",
    "label",
    "manifest",
    "measure",
    "no_result_accuracy",
    "parse_measure",
    "provider_concentration",
    "rbo",
    "with_depth",
]
