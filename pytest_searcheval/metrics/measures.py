"""The built-in measures, one registered function each; its docstring is its definition.

Shared conventions (the report's manifest states them too): ranks i are 1-based; a document is
relevant when its grade >= the relevance level (the run's, or the measure's own ``rel=N``); R
is the number of relevant judged documents of the query; rel_i is 1 when the document at rank
i is relevant; unjudged documents are non-relevant; ``@k`` looks at ranks <= k. A measure's
*undefined* queries are NaN by default (left out of aggregates) and 0.0 in trec-compat mode
(trec_eval ``-c``). Ties were broken before any measure sees the ranking (score descending,
then document id descending).
"""

from __future__ import annotations

import numpy as np

from pytest_searcheval.metrics.kernels import BoolArray, Calc, FloatArray
from pytest_searcheval.metrics.registry import measure

Result = tuple[FloatArray, BoolArray]


def _no_rel(calc: Calc) -> BoolArray:
    undefined: BoolArray = calc.num_rel == 0
    return undefined


def _no_gain(calc: Calc) -> BoolArray:
    undefined: BoolArray = calc.count(calc.grade > 0) == 0
    return undefined


def _k(name: str, k: int | None) -> int:
    if k is None:  # parse_measure guarantees a cut-off for these measures
        raise ValueError(f"measure {name}: needs a cut-off")
    return k


@measure("nDCG")
def ndcg(calc: Calc, k: int | None) -> Result:
    """nDCG@k = DCG@k / IDCG@k, DCG@k = sum_{i<=k} gain(g_i) / log2(i + 1).

    gain(g) = 2^g - 1 (exp, the default) or g (linear, trec_eval's), 0 for g <= 0 and for
    unjudged documents. IDCG@k is the DCG@k of every judged document with g > 0, sorted by
    grade. Without k, the whole ranking and the whole ideal list (trec_eval ``ndcg``; with k,
    ``ndcg_cut_k``). Ignores the relevance level (trec_eval does too). Undefined when IDCG is 0
    (no judged document with a positive grade)."""
    values, idcg = calc.ndcg(k)
    return values, idcg <= 0


@measure("P", "required", relevance=True)
def precision(calc: Calc, k: int | None) -> Result:
    """P@k = sum_{i<=k} rel_i / k, divided by k also when fewer than k results came back
    (trec_eval ``P_k``). Undefined when R = 0."""
    return calc.precision(_k("P", k)), _no_rel(calc)


@measure("R", "required", relevance=True)
def recall(calc: Calc, k: int | None) -> Result:
    """R@k = sum_{i<=k} rel_i / R (trec_eval ``recall_k``). Undefined when R = 0."""
    return calc.recall(_k("R", k)), _no_rel(calc)


@measure("RR", relevance=True)
def rr(calc: Calc, k: int | None) -> Result:
    """RR = 1 / (rank of the first relevant document), 0 when none is retrieved (trec_eval
    ``recip_rank``); RR@k looks at ranks <= k only (``recip_rank`` of the run cut at k).
    Undefined when R = 0."""
    return calc.rr(k), _no_rel(calc)


@measure("AP", relevance=True)
def ap(calc: Calc, k: int | None) -> Result:
    """AP = (1/R) sum_{i: rel_i} P@i (trec_eval ``map``); AP@k sums over i <= k and still
    divides by R (``map_cut_k``). A relevant document never retrieved adds 0 but counts in R.
    Undefined when R = 0."""
    return calc.ap(k), _no_rel(calc)


@measure("bpref", relevance=True, aliases=("Bpref",))
def bpref(calc: Calc, k: int | None) -> Result:
    """bpref = (1/R) sum over retrieved relevant r of (1 - min(n_r, R) / min(R, N)).

    n_r is the number of judged non-relevant documents ranked above r, N the number of judged
    non-relevant documents of the query (0 <= grade < level); unjudged documents and negative
    grades are skipped (trec_eval ``bpref``). bpref@k is bpref of the ranking cut at k (the
    non-relevant documents above a relevant one are counted within the cut). Undefined when
    R = 0."""
    return calc.bpref(k), _no_rel(calc)


@measure("Judged", "required")
def judged(calc: Calc, k: int | None) -> Result:
    """Judged@k = (number of judged documents in the top k) / k, divided by k also when fewer
    came back (ir_measures ``Judged@k``); any grade, negative included, is a judgment. Defined
    for every query, with or without relevant documents."""
    return calc.judged(_k("Judged", k)), np.zeros(calc.n, dtype=bool)


@measure("Rprec", "forbidden", relevance=True)
def rprec(calc: Calc, k: int | None) -> Result:
    """Rprec = sum_{i<=R} rel_i / R: precision at rank R, R-precision (trec_eval ``Rprec``).
    A ranking shorter than R counts its missing ranks as non-relevant. Undefined when R = 0."""
    return calc.rprec(), _no_rel(calc)


@measure("Success", "required", relevance=True)
def success(calc: Calc, k: int | None) -> Result:
    """Success@k = 1 when a relevant document is ranked within the top k, else 0 (trec_eval
    ``success_k``). Undefined when R = 0."""
    return calc.success(_k("Success", k)), _no_rel(calc)


@measure("infAP", relevance=True)
def infap(calc: Calc, k: int | None) -> Result:
    """Inferred AP (Yilmaz and Aslam, CIKM 2006), as trec_eval ``infAP`` computes it.

    Documents fall in three groups: absent from the qrels (outside the judged pool: skipped),
    negative grade (pooled but not judged: counted as pooled), grade >= 0 (judged, relevant at
    grade >= level). For a relevant document at rank j + 1 (j documents above it), with a the
    relevant, n the judged non-relevant and u the pooled-unjudged documents above it::

        term = 1                                                       if j = 0
        term = 1/(j+1) + j/(j+1) * (a+n+u)/j * (a+eps)/(a+n+2 eps)     otherwise

    eps = 0.00001 (trec_eval's INFAP_EPSILON); infAP = (1/R) sum of the terms. With every
    retrieved document judged it equals AP up to eps. infAP@k is infAP of the ranking cut at k.
    Undefined when R = 0."""
    return calc.infap(k), _no_rel(calc)


@measure("ERR")
def err(calc: Calc, k: int | None) -> Result:
    """Expected reciprocal rank (Chapelle, Metzler, Zhang and Grinspan, CIKM 2009).

    ERR@k = sum_{r<=k} (1/r) R_r prod_{i<r} (1 - R_i), with the stopping probability
    R(g) = (2^g - 1) / 2^g_max for the grade g of the document at rank i (0 for g <= 0 and for
    unjudged documents). g_max is the top of the collection's grade scale (``max_grade`` of
    :func:`evaluate`, else the largest grade in the qrels given). The gain mapping is
    Chapelle's exponential one whatever the nDCG gain, and the relevance level plays no part.
    Without k, the whole ranking. No trec_eval equivalent. Undefined when no judged document
    has a positive grade."""
    return calc.err(k), _no_gain(calc)
