"""evaluate(), aggregate() and manifest(): the public entry points of the per-query measures."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from pytest_searcheval.metrics import measures as _builtins  # noqa: F401  (registers them)
from pytest_searcheval.metrics.kernels import Calc, FloatArray
from pytest_searcheval.metrics.packing import pack
from pytest_searcheval.metrics.registry import REGISTRY, Measure, label, parse_measure
from pytest_searcheval.types import MetricManifest

GAINS = ("exp", "linear")


def _resolve_gain(gain: str | None, trec_compat: bool) -> str:
    if gain is None:
        return "linear" if trec_compat else "exp"
    if gain not in GAINS:
        raise ValueError(f"gain {gain!r}: expected one of {', '.join(GAINS)}")
    if trec_compat and gain != "linear":
        raise ValueError(f"gain {gain!r}: trec_compat=True uses trec_eval's linear gain")
    return gain


def _check_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{what} {value!r}: expected an integer")
    return int(value)


def _check_max_grade(qrels: Mapping[str, Mapping[str, int]], max_grade: int) -> None:
    for qid, judged in qrels.items():
        for doc, g in judged.items():
            if g > max_grade:
                raise ValueError(
                    f"qrels: query {qid!r}, document {doc!r}: grade {g} is above the "
                    f"grade scale's maximum {max_grade} (max_grade)"
                )


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float] | Sequence[str]],
    measures: Iterable[str | Measure],
    *,
    relevance_level: int = 1,
    gain: str | None = None,
    trec_compat: bool = False,
    max_grade: int | None = None,
) -> dict[str, dict[str, float]]:
    """Score every query of ``qrels`` against ``run``: ``{qid: {measure: value}}``.

    ``qrels`` is ``{qid: {doc: grade}}`` (integer grades; an inspected 0 is a judgment, an
    absent pair is unjudged). ``run`` is ``{qid: {doc: score}}`` (ordered by score descending,
    ties by doc id descending) or ``{qid: [doc, ...]}`` (taken in the given order). Each
    measure's values are keyed by its name as given (``"Bpref"`` stays ``"Bpref"``); the
    definitions are the docstrings of ``pytest_searcheval.metrics.measures`` and the table in
    docs/metrics.md.

    ``relevance_level`` is the run's: a binary measure calls a document relevant when its grade
    is at least that, unless its name sets its own (``P(rel=2)@5``). ``max_grade`` is the top
    of the grade scale, ERR's g_max (default: the largest grade in ``qrels``; a grade above it
    is an error).

    Queries without a relevant document get NaN for every relevance measure (nDCG and ERR:
    without a positive grade), so :func:`aggregate` leaves them out; ``trec_compat=True``
    scores them 0.0 and makes the default gain linear, so the values equal trec_eval's
    (``-c``) to 1e-9.

    Raises ValueError naming the query, document or measure at fault for a non-integer or
    missing grade, a non-finite or non-numeric score, a duplicate document in a ranked list,
    an unknown measure or parameter, or a cut-off k <= 0.
    """
    wanted: dict[str, Measure] = {}
    for m in measures:
        wanted.setdefault(label(m), parse_measure(m))
    if not wanted:
        raise ValueError("measures: expected at least one measure name")
    level = _check_int("relevance_level", relevance_level)
    top = None if max_grade is None else _check_int("max_grade", max_grade)
    g = _resolve_gain(gain, trec_compat)
    packed = pack(qrels, run, single=trec_compat)
    if top is not None and packed.grade.size and int(packed.grade.max()) > top:
        _check_max_grade(qrels, top)
    calc = Calc(packed, level, g, top)
    computed: dict[Measure, FloatArray] = {}
    columns: dict[str, FloatArray] = {}
    for name, m in wanted.items():
        if m not in computed:
            at = calc if m.rel is None else calc.at_level(m.rel)
            values, undefined = REGISTRY[m.name].compute(at, m.k)
            if not trec_compat:
                values = np.where(undefined, np.nan, values)
            computed[m] = values
        columns[name] = computed[m]
    names = list(columns)
    rows = zip(*(columns[n].tolist() for n in names), strict=True)
    return {
        qid: dict(zip(names, row, strict=True)) for qid, row in zip(packed.qids, rows, strict=True)
    }


def aggregate(
    per_query: Mapping[str, Mapping[str, float]],
    measures: Iterable[str] | None = None,
) -> dict[str, float]:
    """Mean of each measure over the queries where it is defined.

    The denominator of measure m is the number of queries whose value for m is a finite number:
    with the default conventions, queries without relevant documents (NaN) are left out; with
    ``trec_compat=True`` they score 0 and count, which is trec_eval ``-c``'s average over every
    query of the qrels. A measure defined for no query aggregates to NaN. Use
    :func:`aggregate_counts` for the denominators.
    """
    sums, counts = _sums(per_query, measures)
    return {m: (sums[m] / counts[m] if counts[m] else math.nan) for m in sums}


def aggregate_counts(
    per_query: Mapping[str, Mapping[str, float]],
    measures: Iterable[str] | None = None,
) -> dict[str, int]:
    """The denominator :func:`aggregate` uses for each measure (queries with a defined value)."""
    return _sums(per_query, measures)[1]


def _sums(
    per_query: Mapping[str, Mapping[str, float]], measures: Iterable[str] | None
) -> tuple[dict[str, float], dict[str, int]]:
    names: list[str] = []
    if measures is None:
        names = list(dict.fromkeys(m for row in per_query.values() for m in row))
    else:
        for m in measures:
            parse_measure(m)  # an unknown name is an error, not a missing column
            names.append(label(m))
    sums = dict.fromkeys(names, 0.0)
    counts = dict.fromkeys(names, 0)
    for qid, row in per_query.items():
        for m in names:
            if m not in row:
                raise ValueError(f"per-query results: query {qid!r} has no value for {m}")
            v = float(row[m])
            if math.isfinite(v):
                sums[m] += v
                counts[m] += 1
    return sums, counts


def manifest(
    *,
    measures: Iterable[str | Measure] = (),
    relevance_level: int = 1,
    gain: str | None = None,
    trec_compat: bool = False,
    max_grade: int | None = None,
) -> MetricManifest:
    """The conventions behind a set of numbers, as JSON-safe data that reports embed."""
    g = _resolve_gain(gain, trec_compat)
    names = [label(m) for m in measures]
    parsed = [parse_measure(m) for m in measures]
    binary = sorted({d.name for d in REGISTRY.values() if d.relevance})
    own_levels = {n: m.rel for n, m in zip(names, parsed, strict=True) if m.rel is not None}
    out: MetricManifest = {
        "measures": names,
        "mode": "trec_compat" if trec_compat else "default",
        "gain": {"exp": "2^grade - 1", "linear": "grade"}[g] + " (grades <= 0 give gain 0)",
        "discount": "1 / log2(rank + 1), rank 1-based",
        "ideal_ranking": "every judged document with grade > 0, by grade descending, cut at k",
        "relevance_level": int(relevance_level),
        "binary_relevance": f"grade >= {int(relevance_level)} ({', '.join(binary)}), unless "
        "the measure names its own level, as in P(rel=2)@5",
        "cutoffs": "P@k divides by k; R@k by the number of relevant documents; AP@k by the "
        "number of relevant documents (trec_eval map_cut); Judged@k by k",
        "ties": "score descending"
        + (", compared as 32-bit floats as trec_eval holds them" if trec_compat else "")
        + ", then document id descending (trec_eval); ranked lists are taken in the given order",
        "unjudged_documents": "non-relevant; skipped by bpref; outside the pool for infAP",
        "negative_grades": "non-relevant, gain 0; treated as unjudged by bpref and as pooled "
        "but unjudged by infAP (trec_eval)",
        "queries_absent_from_run": "scored as an empty ranking (trec_eval -c)",
        "queries_absent_from_qrels": "ignored",
        "queries_without_relevant_documents": (
            "scored 0 and averaged (trec_eval -c)"
            if trec_compat
            else "NaN per query, excluded from aggregates (scored by no-result accuracy); "
            "nDCG and ERR are NaN when no judged document has a positive grade"
        ),
        "aggregate": "arithmetic mean over queries with a finite value",
    }
    if own_levels:
        out["measure_relevance_levels"] = own_levels
    if any(m.name == "ERR" for m in parsed):
        out["err_stopping_probability"] = "(2^grade - 1) / 2^g_max, g_max = " + (
            str(max_grade) if max_grade is not None else "the largest grade in the qrels"
        )
    return out
