"""The vectorised kernels: every measure for every query at once, on the packed arrays.

:class:`Calc` sorts the judged pairs by (query, rank) once; each kernel is then a handful of
numpy passes (``bincount``, ``cumsum``) over the flat arrays, with no loop over queries. The
formulas and conventions are in the docstrings of the measures (``measures.py``).
"""

from __future__ import annotations

import copy

import numpy as np
import numpy.typing as npt

from pytest_searcheval.metrics.packing import NOT_RETRIEVED, IntArray, Packed

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: trec_eval's INFAP_EPSILON (trec_eval.h): keeps infAP's judged-precision term finite
INFAP_EPSILON = 0.00001


class Calc:
    """Per-query measure vectors over a packed input; shared intermediate arrays are cached.

    What a custom measure (``@metrics.measure``) receives. Arrays over the judged pairs, sorted
    by query then rank: ``q`` (query index, 0..n-1), ``rank`` (0-based, ``NOT_RETRIEVED`` when
    the run does not hold the document), ``grade``, ``rel`` (grade >= ``level``) and
    ``retrieved``; per query: ``num_rel`` (relevant documents) and ``start_of`` (for each pair,
    the index of its query's first pair). ``n`` is the number of queries, ``gain`` "exp" or
    "linear", ``max_grade`` the top of the grade scale (ERR's g_max). ``count(mask)`` sums a
    pair mask per query; ``cut(k)`` is the mask of the pairs ranked within the top k.
    """

    def __init__(self, p: Packed, level: int, gain: str, max_grade: int | None = None) -> None:
        self.n = len(p.qids)
        self.gain = gain
        # sort judged pairs by (query, rank) once; every rank-order computation uses this order
        order = np.lexsort((p.rank, p.q))
        self.q = p.q[order]
        self.rank = p.rank[order]
        self.grade = p.grade[order]
        self.retrieved = self.rank < NOT_RETRIEVED
        # index of each pair's query's first pair in the sorted arrays
        starts = np.searchsorted(self.q, np.arange(self.n), side="left")
        self.start_of = starts[self.q] if self.q.size else self.q
        top = int(self.grade.max()) if self.grade.size else 0
        self.max_grade = top if max_grade is None else max_grade
        self._levels: dict[int, Calc] = {}
        self._set_level(level)

    def _set_level(self, level: int) -> None:
        self.level = level
        self.rel = self.grade >= level
        self.num_rel = np.bincount(self.q, weights=self.rel, minlength=self.n)
        self._rel_pos: IntArray | None = None

    def at_level(self, level: int) -> Calc:
        """This input at another relevance level (``P(rel=2)@5``), sharing the sorted arrays."""
        if level == self.level:
            return self
        other = self._levels.get(level)
        if other is None:
            other = copy.copy(self)
            other._levels = {}
            other._set_level(level)
            self._levels[level] = other
        return other

    # ---- helpers a custom measure may use

    def count(self, mask: BoolArray) -> FloatArray:
        """Per query, the number of pairs where ``mask`` holds."""
        return np.bincount(self.q, weights=mask, minlength=self.n).astype(np.float64)

    _count = count  # the name custom measures used before Calc was public

    def gains(self, grade: IntArray) -> FloatArray:
        """nDCG's gain of each grade: 2^g - 1 ("exp") or g ("linear"), 0 for g <= 0."""
        g = np.maximum(grade, 0).astype(np.float64)
        return np.exp2(g) - 1.0 if self.gain == "exp" else g

    _gains = gains

    def cut(self, k: int | None) -> BoolArray:
        """The pairs ranked within the top ``k`` (every retrieved pair when ``k`` is None)."""
        return self.retrieved if k is None else self.rank < k

    _cut = cut

    def above(self, mask: BoolArray) -> IntArray:
        """For each pair, how many pairs of its query with ``mask`` rank strictly above it."""
        c = np.cumsum(mask, dtype=np.int64)
        before: IntArray = c - mask
        out: IntArray = before - before[self.start_of]
        return out

    def relevant_position(self) -> IntArray:
        """1-based position of each relevant pair among its query's relevant pairs (rank order)."""
        if self._rel_pos is None:
            self._rel_pos = (self.above(self.rel) + self.rel).astype(np.int64)
        return self._rel_pos

    _relevant_position = relevant_position

    def _per_rel(self, sums: FloatArray) -> FloatArray:
        return np.divide(sums, self.num_rel, out=np.zeros(self.n), where=self.num_rel > 0)

    def _sum(self, weights: FloatArray) -> FloatArray:
        out: FloatArray = np.bincount(self.q, weights=weights, minlength=self.n).astype(np.float64)
        return out

    # ---- the kernels of the built-in measures

    def ndcg(self, k: int | None) -> tuple[FloatArray, FloatArray]:
        """nDCG@k and IDCG@k per query (nDCG is 0 where IDCG is 0)."""
        cut = self.cut(k)
        disc = np.log2(np.where(cut, self.rank, 0).astype(np.float64) + 2.0)
        dcg = self._sum(np.where(cut, self.gains(self.grade) / disc, 0.0))
        # ideal: every pair of a query sorted by grade descending, position within the query
        order = np.lexsort((-self.grade, self.q))
        g = self.grade[order]
        pos = np.arange(g.size) - self.start_of
        keep = (g > 0) if k is None else (g > 0) & (pos < k)
        idcg = self._sum(np.where(keep, self.gains(g) / np.log2(pos + 2.0), 0.0))
        with np.errstate(invalid="ignore", divide="ignore"):
            ndcg: FloatArray = np.where(idcg > 0, dcg / idcg, 0.0)
        return ndcg, idcg.astype(np.float64)

    def precision(self, k: int) -> FloatArray:
        return self.count(self.rel & (self.rank < k)) / k

    def recall(self, k: int) -> FloatArray:
        return self._per_rel(self.count(self.rel & (self.rank < k)))

    def rr(self, k: int | None) -> FloatArray:
        hit = self.rel & self.cut(k)
        qs, first = np.unique(self.q[hit], return_index=True)
        out = np.zeros(self.n)
        out[qs] = 1.0 / (self.rank[hit][first] + 1.0)
        return out

    def ap(self, k: int | None) -> FloatArray:
        hit = self.rel & self.cut(k)
        prec = np.where(hit, self.relevant_position() / (np.where(hit, self.rank, 0) + 1.0), 0.0)
        return self._per_rel(self._sum(prec))

    def bpref(self, k: int | None = None) -> FloatArray:
        # trec_eval: judged non-relevant means 0 <= grade < level; negative grades count as unjudged
        nonrel = (self.grade >= 0) & ~self.rel
        num_nonrel = self.count(nonrel)
        above = self.above(nonrel & self.cut(k))
        r = self.num_rel[self.q]
        denom = np.minimum(r, num_nonrel[self.q])
        with np.errstate(invalid="ignore", divide="ignore"):
            penalty = np.where(above > 0, np.minimum(above, r) / denom, 0.0)
        return self._per_rel(self._sum(np.where(self.rel & self.cut(k), 1.0 - penalty, 0.0)))

    def judged(self, k: int) -> FloatArray:
        return self.count(self.rank < k) / k

    def rprec(self) -> FloatArray:
        return self._per_rel(self.count(self.rel & (self.rank < self.num_rel[self.q])))

    def success(self, k: int) -> FloatArray:
        return (self.count(self.rel & (self.rank < k)) > 0).astype(np.float64)

    def infap(self, k: int | None) -> FloatArray:
        # trec_eval m_infAP.c: a retrieved document absent from the qrels is outside the pool and
        # skipped; a negative grade is pooled but unjudged; 0 <= grade < level is judged
        # non-relevant. Every count is of the documents ranked strictly above.
        cut = self.cut(k)
        rel = self.rel & cut
        a = self.above(rel).astype(np.float64)
        nonrel = self.above((self.grade >= 0) & ~self.rel & cut).astype(np.float64)
        pooled = self.above((self.grade < 0) & cut).astype(np.float64)
        first = self.rank == 0  # trec_eval's special case: a relevant first document adds 1
        j = np.where(rel & ~first, self.rank, 1).astype(np.float64)
        term = 1.0 / (j + 1.0) + (j / (j + 1.0)) * ((a + nonrel + pooled) / j) * (
            (a + INFAP_EPSILON) / (a + nonrel + 2 * INFAP_EPSILON)
        )
        term = np.where(first, 1.0, term)
        return self._per_rel(self._sum(np.where(rel, term, 0.0)))

    def err(self, k: int | None) -> FloatArray:
        # Chapelle et al. 2009: R_g = (2^g - 1) / 2^g_max, ERR = sum_r R_r / r prod_{i<r} (1-R_i)
        cut = self.cut(k)
        g = np.maximum(self.grade, 0).astype(np.float64)
        stop = np.where(cut, (np.exp2(g) - 1.0) / 2.0**self.max_grade, 0.0)
        # the product over the pairs ranked above, as the exp of a per-query sum of logs; R < 1
        # always (2^g - 1 < 2^g_max), so every log is finite
        logs = np.log1p(-stop)
        reach = np.exp(self._exclusive_sums(logs))
        with np.errstate(invalid="ignore", divide="ignore"):
            term = np.where(stop > 0, stop / (self.rank + 1.0) * reach, 0.0)
        return self._sum(term)

    def _exclusive_sums(self, values: FloatArray) -> FloatArray:
        """Per pair, the sum of ``values`` over the earlier pairs of its query.

        One cumsum over every query, restarted near 0 at each query's first pair by
        subtracting the previous query's total there: the running sum stays as small as one
        query's, so the rounding error does too (a plain global cumsum minus its value at the
        query start loses digits once the sum is large)."""
        if not values.size:
            return values
        first = np.flatnonzero(np.r_[True, self.q[1:] != self.q[:-1]])
        totals = self._sum(values)
        shifted = values.copy()
        shifted[first[1:]] -= totals[self.q[first[1:] - 1]]
        c = np.cumsum(shifted)
        before: FloatArray = c - values
        out: FloatArray = before - before[self.start_of]
        return out


#: the name a custom measure's ``calc`` had before it was public
_Calc = Calc
