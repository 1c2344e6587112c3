"""Packing a run and its judgments into flat arrays, one entry per (query, judged document).

For each judged pair the arrays hold its query's index, its grade and its 0-based rank in the
run (``NOT_RETRIEVED`` when the run does not hold it). Unjudged retrieved documents are never
materialised: every measure treats them as non-relevant (bpref and infAP skip them), so their
only effect is on the ranks of the judged documents, found with one sort per query.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from numbers import Integral
from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]

#: the rank of a judged document the run does not hold; larger than any real rank
NOT_RETRIEVED = np.int64(2**62)


@dataclass(frozen=True)
class Packed:
    """The judged pairs of every query of the qrels, in qrels order (see the module doc)."""

    qids: list[str]
    q: IntArray  # query index of each judged pair
    rank: IntArray  # 0-based rank, NOT_RETRIEVED when absent from the run
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


def _ranks_from_scores(
    qid: str, ranking: Mapping[str, float], docs: list[str], single: bool
) -> IntArray:
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
    if single:
        # trec_eval holds a score in a C float: scores equal in 32 bits tie, then go by doc id
        with np.errstate(over="ignore"):
            scores = scores.astype(np.float32)
            sj = sj.astype(np.float32)
    present = ~np.isnan(sj)
    ordered = np.sort(scores)
    hi = np.searchsorted(ordered, sj, side="right")
    lo = np.searchsorted(ordered, sj, side="left")
    ranks = np.where(present, n - hi, NOT_RETRIEVED).astype(np.int64)
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
    nr = int(NOT_RETRIEVED)
    return np.fromiter(map(pos.get, docs, repeat(nr, len(docs))), dtype=np.int64, count=len(docs))


def pack(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float] | Sequence[str]],
    single: bool = False,
) -> Packed:
    """Check ``qrels`` and ``run`` and pack them; ValueError names the query and document.

    ``single`` ranks scores as trec_eval does, rounded to 32-bit floats (trec-compat mode);
    otherwise they are compared as given."""
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
            r = np.full(len(docs), NOT_RETRIEVED, dtype=np.int64)
        elif isinstance(ranking, Mapping):
            r = _ranks_from_scores(qid, ranking, docs, single)
        elif callable(positions := getattr(ranking, "positions", None)):
            # a ranked list that finds documents itself (a run file's RankedIds): distinct ids
            found = np.asarray(positions(docs), dtype=np.int64)
            r = np.where(found < 0, NOT_RETRIEVED, found)
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
    return Packed(qids, q, rank, np.array(grades, dtype=np.int64))
