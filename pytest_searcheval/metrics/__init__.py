"""Per-query relevance measures and set-level measures, pure numpy.

Every measure is computed from one flat, vectorised representation of the input: for each
(query, judged document) pair its grade and its 0-based rank in the run (or "not retrieved").
Unjudged retrieved documents never need to be materialised, because every supported measure
treats them as non-relevant (bpref ignores them), so their only effect is on the ranks of the
judged documents, which are computed with one sort per query.

Measures are named as ir_measures names them: ``nDCG@k``, ``nDCG``, ``P@k``, ``R@k``, ``RR``,
``RR@k``, ``AP``, ``AP@k``, ``bpref``, ``Judged@k``. Conventions (see :func:`manifest` and
docs/metrics.md):

* ranking: a ``{doc: score}`` run is ordered by score descending, ties by doc id descending
  (trec_eval's order); a ``[doc, ...]`` run is taken in the given order;
* gain: ``2**g - 1`` ("exp", default) or ``g`` ("linear", trec_eval); grades <= 0 have gain 0;
  the ideal ranking holds every judged document with grade > 0, sorted by grade, cut at k;
* binary measures (P, R, RR, AP, bpref) call a document relevant when grade >= relevance_level;
* unjudged documents are non-relevant; bpref skips them; documents with a negative grade are
  non-relevant and, in bpref, treated as unjudged (trec_eval);
* a query in the qrels but absent from the run is an empty ranking (trec_eval ``-c``);
  a query in the run but not in the qrels is ignored;
* a query without relevant documents: ``NaN`` for every relevance measure by default (it is
  left out of :func:`aggregate` and scored by no-result accuracy instead), ``0.0`` in
  ``trec_compat`` mode (what trec_eval prints).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from numbers import Integral
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "MEASURE_NAMES",
    "Concentration",
    "Measure",
    "NoResultAccuracy",
    "Violation",
    "adversarial_resistance_rate",
    "adversarial_top1_rate",
    "aggregate",
    "evaluate",
    "grade0_rate_at_k",
    "hard_filter_violations",
    "jaccard_at_k",
    "manifest",
    "no_result_accuracy",
    "parse_measure",
    "provider_concentration",
    "rbo",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MeasureDef:
    """A measure of the registry: how it takes a cut-off and how it is computed.

    ``cutoff`` is ``required`` (``P@k``), ``optional`` (``AP`` or ``AP@k``) or ``forbidden``.
    ``compute(calc, k)`` returns the per-query values and a mask of the queries for which the
    measure is undefined (NaN outside trec-compat mode).
    """

    name: str
    cutoff: str
    compute: Callable[[_Calc, int | None], tuple[FloatArray, npt.NDArray[np.bool_]]]


#: name -> definition; :func:`measure` adds to it (a conftest may add a measure of its own).
REGISTRY: dict[str, MeasureDef] = {}


def measure(name: str, cutoff: str = "optional") -> Callable[[Any], Any]:
    """Register ``fn(calc, k) -> (values, undefined)`` as measure ``name``."""
    if cutoff not in ("required", "optional", "forbidden"):
        raise ValueError(f"measure {name}: cutoff must be required, optional or forbidden")

    def register(fn: Any) -> Any:
        REGISTRY[name] = MeasureDef(name, cutoff, fn)
        return fn

    return register


_MEASURE_RE = re.compile(r"^(?P<name>[A-Za-z]+)(?:@(?P<k>[^@]*))?$")
_NOT_RETRIEVED = np.int64(2**62)
GAINS = ("exp", "linear")


@dataclass(frozen=True, order=True)
class Measure:
    """A parsed measure name: ``name`` and an optional cut-off ``k`` (None = whole ranking)."""

    name: str
    k: int | None = None

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"


def parse_measure(text: str | Measure) -> Measure:
    """Parse ``"nDCG@10"`` into ``Measure("nDCG", 10)``; ValueError names the bad measure."""
    if isinstance(text, Measure):
        return text
    if not isinstance(text, str):
        raise ValueError(f"measure {text!r}: expected a string such as 'nDCG@10'")
    m = _MEASURE_RE.match(text.strip())
    known = ", ".join(
        n if d.cutoff == "forbidden" else f"{n}@k" if d.cutoff == "required" else f"{n}, {n}@k"
        for n, d in REGISTRY.items()
    )
    if m is None or m.group("name") not in REGISTRY:
        raise ValueError(f"measure {text!r}: unknown measure; expected one of {known}")
    name = m.group("name")
    raw_k = m.group("k")
    if raw_k is None:
        if REGISTRY[name].cutoff == "required":
            raise ValueError(f"measure {text!r}: {name} needs a cut-off, e.g. {name}@10")
        return Measure(name, None)
    if REGISTRY[name].cutoff == "forbidden":
        raise ValueError(f"measure {text!r}: {name} takes no cut-off")
    if not re.fullmatch(r"[+-]?\d+", raw_k):
        raise ValueError(f"measure {text!r}: cut-off {raw_k!r} is not an integer")
    k = int(raw_k)
    if k <= 0:
        raise ValueError(f"measure {text!r}: cut-off must be a positive integer, got {k}")
    return Measure(name, k)


# --------------------------------------------------------------------------------------------
# Packing the input into flat arrays


@dataclass(frozen=True)
class _Packed:
    qids: list[str]
    q: IntArray  # query index of each judged pair
    rank: IntArray  # 0-based rank, _NOT_RETRIEVED when absent from the run
    grade: IntArray


def _check_grades(qid: str, judged: Mapping[str, Any]) -> list[int]:
    grades = list(judged.values())
    if not grades or set(map(type, grades)) == {int}:
        return grades
    out: list[int] = []
    for doc, g in judged.items():
        if g is None:
            raise ValueError(f"qrels: query {qid!r}, document {doc!r}: grade is missing")
        if isinstance(g, bool) or not isinstance(g, Integral):
            raise ValueError(
                f"qrels: query {qid!r}, document {doc!r}: grade {g!r} is not an integer"
            )
        out.append(int(g))
    return out


def _ranks_from_scores(qid: str, ranking: Mapping[str, float], docs: list[str]) -> IntArray:
    n = len(ranking)
    try:
        scores = np.fromiter(ranking.values(), dtype=np.float64, count=n)
    except (TypeError, ValueError) as exc:
        for doc, s in ranking.items():
            try:
                float(s)
            except (TypeError, ValueError):
                raise ValueError(
                    f"run: query {qid!r}, document {doc!r}: score {s!r} is not a number"
                ) from exc
        raise ValueError(f"run: query {qid!r}: scores are not numbers") from exc
    if not np.isfinite(scores).all():
        bad = int(np.flatnonzero(~np.isfinite(scores))[0])
        doc = list(ranking)[bad]
        raise ValueError(
            f"run: query {qid!r}, document {doc!r}: score {float(scores[bad])!r} is not finite"
        )
    # every score is finite, so NaN marks a judged document that was not retrieved
    sj = np.fromiter(
        map(ranking.get, docs, repeat(math.nan, len(docs))), dtype=np.float64, count=len(docs)
    )
    present = ~np.isnan(sj)
    ordered = np.sort(scores)
    hi = np.searchsorted(ordered, sj, side="right")
    lo = np.searchsorted(ordered, sj, side="left")
    ranks = np.where(present, n - hi, _NOT_RETRIEVED).astype(np.int64)
    tied = np.flatnonzero(present & (hi - lo > 1))
    if tied.size:
        # trec_eval breaks score ties by doc id descending: a tied doc with a larger id ranks first
        keys = list(ranking)
        for t in tied.tolist():
            doc = docs[t]
            same = np.flatnonzero(scores == sj[t]).tolist()
            ranks[t] += sum(1 for i in same if keys[i] > doc)
    return ranks


def _ranks_from_list(qid: str, ranking: Sequence[str], docs: list[str]) -> IntArray:
    n = len(ranking)
    pos = dict(zip(ranking, range(n), strict=False))
    if len(pos) != n:
        seen: set[str] = set()
        for i, d in enumerate(ranking):
            if d in seen:
                raise ValueError(
                    f"run: query {qid!r}, document {d!r}: duplicate document id at rank {i + 1}"
                )
            seen.add(d)
    nr = int(_NOT_RETRIEVED)
    return np.fromiter(map(pos.get, docs, repeat(nr, len(docs))), dtype=np.int64, count=len(docs))


def _pack(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float] | Sequence[str]],
) -> _Packed:
    qids = list(qrels)
    sizes: list[int] = []
    ranks: list[IntArray] = []
    grades: list[int] = []
    for qid in qids:
        judged = qrels[qid]
        if not isinstance(judged, Mapping):
            raise ValueError(f"qrels: query {qid!r}: expected a mapping of document id to grade")
        docs = list(judged)
        grades.extend(_check_grades(qid, judged))
        ranking = run.get(qid)
        if ranking is None:
            r = np.full(len(docs), _NOT_RETRIEVED, dtype=np.int64)
        elif isinstance(ranking, Mapping):
            r = _ranks_from_scores(qid, ranking, docs)
        elif isinstance(ranking, str) or not isinstance(ranking, Sequence):
            raise ValueError(
                f"run: query {qid!r}: expected a mapping of document id to score or a list "
                f"of document ids, got {type(ranking).__name__}"
            )
        else:
            r = _ranks_from_list(qid, ranking, docs)
        sizes.append(len(docs))
        ranks.append(r)
    q = np.repeat(np.arange(len(qids), dtype=np.int64), sizes)
    rank = np.concatenate(ranks) if ranks else np.zeros(0, dtype=np.int64)
    return _Packed(qids, q, rank, np.array(grades, dtype=np.int64))


# --------------------------------------------------------------------------------------------
# Measures on the packed arrays


class _Calc:
    """Per-query measure vectors over a packed input; shared intermediate arrays are cached."""

    def __init__(self, p: _Packed, level: int, gain: str) -> None:
        self.n = len(p.qids)
        self.level = level
        self.gain = gain
        # sort judged pairs by (query, rank) once; every rank-order computation uses this order
        order = np.lexsort((p.rank, p.q))
        self.q = p.q[order]
        self.rank = p.rank[order]
        self.grade = p.grade[order]
        self.rel = self.grade >= level
        self.retrieved = self.rank < _NOT_RETRIEVED
        self.num_rel = np.bincount(self.q, weights=self.rel, minlength=self.n)
        # index of each pair's query's first pair in the sorted arrays
        starts = np.searchsorted(self.q, np.arange(self.n), side="left")
        self.start_of = starts[self.q] if self.q.size else self.q
        self._rel_pos: IntArray | None = None

    def _count(self, mask: npt.NDArray[np.bool_]) -> FloatArray:
        return np.bincount(self.q, weights=mask, minlength=self.n).astype(np.float64)

    def _gains(self, grade: IntArray) -> FloatArray:
        g = np.maximum(grade, 0).astype(np.float64)
        return np.exp2(g) - 1.0 if self.gain == "exp" else g

    def _cut(self, k: int | None) -> npt.NDArray[np.bool_]:
        return self.retrieved if k is None else self.rank < k

    def ndcg(self, k: int | None) -> tuple[FloatArray, FloatArray]:
        cut = self._cut(k)
        disc = np.log2(np.where(cut, self.rank, 0).astype(np.float64) + 2.0)
        dcg = np.bincount(
            self.q, weights=np.where(cut, self._gains(self.grade) / disc, 0.0), minlength=self.n
        )
        # ideal: every pair of a query sorted by grade descending, position within the query
        order = np.lexsort((-self.grade, self.q))
        g = self.grade[order]
        pos = np.arange(g.size) - self.start_of
        keep = (g > 0) if k is None else (g > 0) & (pos < k)
        ideal = np.where(keep, self._gains(g) / np.log2(pos + 2.0), 0.0)
        idcg = np.bincount(self.q, weights=ideal, minlength=self.n)
        with np.errstate(invalid="ignore", divide="ignore"):
            ndcg: FloatArray = np.where(idcg > 0, dcg / idcg, 0.0)
        return ndcg, idcg.astype(np.float64)

    def precision(self, k: int) -> FloatArray:
        return self._count(self.rel & (self.rank < k)) / k

    def recall(self, k: int) -> FloatArray:
        hits = self._count(self.rel & (self.rank < k))
        return np.divide(hits, self.num_rel, out=np.zeros(self.n), where=self.num_rel > 0)

    def rr(self, k: int | None) -> FloatArray:
        hit = self.rel & self._cut(k)
        qs, first = np.unique(self.q[hit], return_index=True)
        out = np.zeros(self.n)
        out[qs] = 1.0 / (self.rank[hit][first] + 1.0)
        return out

    def _relevant_position(self) -> IntArray:
        """1-based position of each relevant pair among its query's relevant pairs (rank order)."""
        if self._rel_pos is None:
            c = np.cumsum(self.rel)
            before_start: IntArray = (c - self.rel)[self.start_of]
            self._rel_pos = (c - before_start).astype(np.int64)
        return self._rel_pos

    def ap(self, k: int | None) -> FloatArray:
        hit = self.rel & self._cut(k)
        prec = np.where(hit, self._relevant_position() / (np.where(hit, self.rank, 0) + 1.0), 0.0)
        s = np.bincount(self.q, weights=prec, minlength=self.n)
        return np.divide(s, self.num_rel, out=np.zeros(self.n), where=self.num_rel > 0)

    def bpref(self, k: int | None = None) -> FloatArray:
        # trec_eval: judged non-relevant means 0 <= grade < level; negative grades count as unjudged
        nonrel = (self.grade >= 0) & ~self.rel
        num_nonrel = self._count(nonrel)
        shown = nonrel & self._cut(k)
        before: IntArray = np.cumsum(shown) - shown  # judged non-relevant retrieved strictly above
        above: IntArray = before - before[self.start_of]
        r = self.num_rel[self.q]
        denom = np.minimum(r, num_nonrel[self.q])
        with np.errstate(invalid="ignore", divide="ignore"):
            penalty = np.where(above > 0, np.minimum(above, r) / denom, 0.0)
        term = np.where(self.rel & self._cut(k), 1.0 - penalty, 0.0)
        s = np.bincount(self.q, weights=term, minlength=self.n)
        return np.divide(s, self.num_rel, out=np.zeros(self.n), where=self.num_rel > 0)

    def judged(self, k: int) -> FloatArray:
        return self._count(self.rank < k) / k


def _resolve_gain(gain: str | None, trec_compat: bool) -> str:
    if gain is None:
        return "linear" if trec_compat else "exp"
    if gain not in GAINS:
        raise ValueError(f"gain {gain!r}: expected one of {', '.join(GAINS)}")
    if trec_compat and gain != "linear":
        raise ValueError(f"gain {gain!r}: trec_compat=True uses trec_eval's linear gain")
    return gain


def evaluate(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float] | Sequence[str]],
    measures: Iterable[str | Measure],
    *,
    relevance_level: int = 1,
    gain: str | None = None,
    trec_compat: bool = False,
) -> dict[str, dict[str, float]]:
    """Score every query of ``qrels`` against ``run``: ``{qid: {measure: value}}``.

    ``qrels`` is ``{qid: {doc: grade}}`` (integer grades; an inspected 0 is a judgment, an absent
    pair is unjudged). ``run`` is ``{qid: {doc: score}}`` (ordered by score descending, ties by
    doc id descending) or ``{qid: [doc, ...]}`` (taken in the given order).

    Formulas, for a query with relevant set Rel (grade >= relevance_level), R = |Rel|, ranks
    i = 1..n, rel_i = 1 if the document at rank i is relevant:

    * ``nDCG@k`` = DCG@k / IDCG@k, DCG@k = sum_{i<=k} gain(g_i) / log2(i + 1), gain = 2^g - 1
      ("exp") or g ("linear"), gain 0 for g <= 0; IDCG@k is the DCG@k of all judged documents
      with g > 0 sorted by grade. ``nDCG`` without k uses the whole ranking.
    * ``P@k`` = sum_{i<=k} rel_i / k (always k, also when fewer than k results are returned).
    * ``R@k`` = sum_{i<=k} rel_i / R.
    * ``RR`` = 1 / (rank of the first relevant document), 0 if none; ``RR@k`` looks at ranks <= k.
    * ``AP`` = (1/R) sum_{i: rel_i} P@i; ``AP@k`` sums over i <= k and still divides by R
      (trec_eval's map_cut).
    * ``bpref`` = (1/R) sum over retrieved relevant r of (1 - min(n_r, R) / min(R, N)), n_r the
      number of judged non-relevant documents ranked above r, N the number of judged
      non-relevant documents (0 <= grade < relevance_level); unjudged and negative-grade
      documents are skipped (trec_eval).
    * ``Judged@k`` = (number of judged documents in the top k) / k.

    Queries without a relevant document get NaN for every measure but ``Judged@k`` (0.0 with
    ``trec_compat=True``); ``nDCG`` is NaN exactly when IDCG is 0. ``trec_compat=True`` also
    makes the default gain linear, so the values equal trec_eval's (``-c``) to 1e-9.

    Raises ValueError naming the query, document or measure at fault for a non-integer or
    missing grade, a non-finite or non-numeric score, a duplicate document in a ranked list,
    an unknown measure, or a cut-off k <= 0.
    """
    parsed: list[Measure] = []
    for m in measures:
        pm = parse_measure(m)
        if pm not in parsed:
            parsed.append(pm)
    if not parsed:
        raise ValueError("measures: expected at least one measure name")
    if isinstance(relevance_level, bool) or not isinstance(relevance_level, Integral):
        raise ValueError(f"relevance_level {relevance_level!r}: expected an integer")
    g = _resolve_gain(gain, trec_compat)
    packed = _pack(qrels, run)
    calc = _Calc(packed, int(relevance_level), g)
    columns: dict[str, FloatArray] = {}
    for m in parsed:
        values, undefined = REGISTRY[m.name].compute(calc, m.k)
        if not trec_compat:
            values = np.where(undefined, np.nan, values)
        columns[str(m)] = values
    names = list(columns)
    rows = zip(*(columns[n].tolist() for n in names), strict=True)
    return {
        qid: dict(zip(names, row, strict=True)) for qid, row in zip(packed.qids, rows, strict=True)
    }


def _k(m: Measure) -> int:
    if m.k is None:  # parse_measure guarantees a cut-off for these measures
        raise ValueError(f"measure {m}: needs a cut-off")
    return m.k


# --------------------------------------------------------------------------------------------
# The standard measures (formulas in :func:`evaluate`)


def _no_rel(calc: _Calc) -> npt.NDArray[np.bool_]:
    undefined: npt.NDArray[np.bool_] = calc.num_rel == 0
    return undefined


@measure("nDCG")
def _ndcg(calc: _Calc, k: int | None) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    values, idcg = calc.ndcg(k)
    return values, idcg <= 0


@measure("P", "required")
def _precision(calc: _Calc, k: int | None) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    return calc.precision(_k(Measure("P", k))), _no_rel(calc)


@measure("R", "required")
def _recall(calc: _Calc, k: int | None) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    return calc.recall(_k(Measure("R", k))), _no_rel(calc)


@measure("RR")
def _rr(calc: _Calc, k: int | None) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    return calc.rr(k), _no_rel(calc)


@measure("AP")
def _ap(calc: _Calc, k: int | None) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    return calc.ap(k), _no_rel(calc)


@measure("bpref")
def _bpref(calc: _Calc, k: int | None) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    # bpref@k: bpref of the ranking cut at k (the judged non-relevant documents above a
    # relevant one are counted within the cut); bpref is trec_eval's, over the whole ranking.
    return calc.bpref(k), _no_rel(calc)


@measure("Judged", "required")
def _judged(calc: _Calc, k: int | None) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    return calc.judged(_k(Measure("Judged", k))), np.zeros(calc.n, dtype=bool)


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
    names: list[str] = (
        [str(parse_measure(m)) for m in measures]
        if measures is not None
        else list(dict.fromkeys(m for row in per_query.values() for m in row))
    )
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
) -> dict[str, Any]:
    """The conventions behind a set of numbers, as JSON-safe data that reports embed."""
    g = _resolve_gain(gain, trec_compat)
    return {
        "measures": [str(parse_measure(m)) for m in measures],
        "mode": "trec_compat" if trec_compat else "default",
        "gain": {"exp": "2^grade - 1", "linear": "grade"}[g] + " (grades <= 0 give gain 0)",
        "discount": "1 / log2(rank + 1), rank 1-based",
        "ideal_ranking": "every judged document with grade > 0, by grade descending, cut at k",
        "relevance_level": int(relevance_level),
        "binary_relevance": f"grade >= {int(relevance_level)} (P, R, RR, AP, bpref)",
        "cutoffs": "P@k divides by k; R@k by the number of relevant documents; AP@k by the "
        "number of relevant documents (trec_eval map_cut); Judged@k by k",
        "ties": "score descending, then document id descending (trec_eval); ranked lists are "
        "taken in the given order",
        "unjudged_documents": "non-relevant; skipped by bpref",
        "negative_grades": "non-relevant, gain 0; treated as unjudged by bpref (trec_eval)",
        "queries_absent_from_run": "scored as an empty ranking (trec_eval -c)",
        "queries_absent_from_qrels": "ignored",
        "queries_without_relevant_documents": (
            "scored 0 and averaged (trec_eval -c)"
            if trec_compat
            else "NaN per query, excluded from aggregates (scored by no-result accuracy); "
            "nDCG is NaN when the ideal DCG is 0"
        ),
        "aggregate": "arithmetic mean over queries with a finite value",
    }


# --------------------------------------------------------------------------------------------
# Set-level measures


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
