"""Default-mode measures against a plain per-query loop written from the definitions."""

from __future__ import annotations

import math
import random

import pytest

from pytest_searcheval.metrics import evaluate

MEASURES = [
    "nDCG@3",
    "nDCG@10",
    "nDCG",
    "P@5",
    "R@10",
    "RR",
    "RR@3",
    "AP",
    "AP@5",
    "bpref",
    "Judged@10",
    "Rprec",
    "Success@1",
    "Success@5",
    "ERR@5",
    "ERR",
    "Bpref",
    "P(rel=2)@5",
    "R(rel=3)@10",
    "AP(rel=2)",
    "RR(rel=3)@5",
    "Rprec(rel=2)",
    "Success(rel=3)@10",
]


def _err(judged: dict[str, int], ranking: list[str], g_max: int) -> float:
    # Chapelle et al. 2009, algorithm 2: the user stops at rank r with probability R_r
    if not any(g > 0 for g in judged.values()):
        return math.nan
    reach, total = 1.0, 0.0
    for r, d in enumerate(ranking, start=1):
        stop = (2 ** max(judged.get(d, 0), 0) - 1) / 2**g_max
        total += reach * stop / r
        reach *= 1 - stop
    return total


def _reference(
    judged: dict[str, int], ranking: list[str], measure: str, level: int, g_max: int = 3
) -> float:
    name, _, raw_k = measure.partition("@")
    if "(rel=" in name:
        name, _, own = name.partition("(rel=")
        level = int(own.rstrip(")"))
    k = int(raw_k) if raw_k else len(ranking)
    top = ranking[:k]
    relevant = {d for d, g in judged.items() if g >= level}
    if name == "ERR":
        return _err(judged, top, g_max)
    if name == "Judged":
        return sum(1 for d in top if d in judged) / k
    if name == "nDCG":

        def dcg(grades: list[int]) -> float:
            return sum((2.0 ** max(g, 0) - 1) / math.log2(i + 2) for i, g in enumerate(grades))

        ideal_grades = sorted((g for g in judged.values() if g > 0), reverse=True)
        ideal = dcg(ideal_grades[: int(raw_k)] if raw_k else ideal_grades)
        return dcg([judged.get(d, 0) for d in top]) / ideal if ideal > 0 else math.nan
    if not relevant:
        return math.nan
    if name == "P":
        return sum(1 for d in top if d in relevant) / k
    if name == "R":
        return sum(1 for d in top if d in relevant) / len(relevant)
    if name == "RR":
        return next((1 / (i + 1) for i, d in enumerate(top) if d in relevant), 0.0)
    if name == "Rprec":
        return sum(1 for d in ranking[: len(relevant)] if d in relevant) / len(relevant)
    if name == "Success":
        return 1.0 if any(d in relevant for d in top) else 0.0
    if name == "AP":
        hits, total = 0, 0.0
        for i, d in enumerate(top):
            if d in relevant:
                hits += 1
                total += hits / (i + 1)
        return total / len(relevant)
    assert name in ("bpref", "Bpref")
    nonrel = {d for d, g in judged.items() if 0 <= g < level}
    r, n, total, above = len(relevant), len(nonrel), 0.0, 0
    for d in ranking:
        if d in relevant:
            total += 1 - min(above, r) / min(r, n) if above else 1.0
        elif d in nonrel:
            above += 1
    return total / r


def _order(scores: dict[str, float]) -> list[str]:
    # score descending, then doc id descending
    return [d for _, d in sorted(((s, d) for d, s in scores.items()), reverse=True)]


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", [21, 22])
def test_default_mode_matches_reference(seed: int, level: int) -> None:
    rng = random.Random(seed)
    pool = [f"doc-{i}" for i in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(50):
        qrels[f"q{q}"] = {d: rng.randint(-1, 3 if q % 7 else 0) for d in rng.sample(pool, 12)}
        if q % 13 != 4:
            run[f"q{q}"] = {
                d: float(rng.randint(0, 6)) for d in rng.sample(pool, rng.randint(0, 30))
            }
    lists = {q: _order(r) for q, r in run.items()}
    for given in (run, lists):
        got = evaluate(qrels, given, MEASURES, relevance_level=level)
        for qid, judged in qrels.items():
            for m in MEASURES:
                want = _reference(judged, lists.get(qid, []), m, level)
                if math.isnan(want):
                    assert math.isnan(got[qid][m]), (qid, m)
                else:
                    assert got[qid][m] == pytest.approx(want, abs=1e-12), (qid, m)


def test_err_takes_g_max_from_the_grade_scale() -> None:
    # grades 0-2 in the qrels, on a scale that goes to 4: g_max = 4 only when it is given
    rng = random.Random(31)
    pool = [f"doc-{i}" for i in range(30)]
    qrels = {f"q{q}": {d: rng.randint(0, 2) for d in rng.sample(pool, 10)} for q in range(20)}
    qrels["q0"]["doc-0"] = 2  # at least one positive grade somewhere
    run = {q: rng.sample(pool, 15) for q in qrels}
    inferred = evaluate(qrels, run, ["ERR@10"])
    declared = evaluate(qrels, run, ["ERR@10"], max_grade=4)
    for qid, judged in qrels.items():
        for got, g_max in ((inferred, 2), (declared, 4)):
            want = _reference(judged, run[qid], "ERR@10", 1, g_max)
            if math.isnan(want):
                assert math.isnan(got[qid]["ERR@10"])
            else:
                assert got[qid]["ERR@10"] == pytest.approx(want, abs=1e-12), (qid, g_max)
    with pytest.raises(ValueError, match=r"query 'q0', document 'doc-0': grade 2 is above .* 1"):
        evaluate(qrels, run, ["ERR@10"], max_grade=1)


def test_err_hand_computed() -> None:
    # scale 0-3; ranking a(3) x b(1) c(2): R = 7/8, 0, 1/8, 3/8
    got = evaluate({"q": {"a": 3, "b": 1, "c": 2}}, {"q": ["a", "x", "b", "c"]}, ["ERR"])["q"]
    want = 7 / 8 + (1 / 8) * (1 / 8) / 3 + (1 / 8) * (7 / 8) * (3 / 8) / 4
    assert got["ERR"] == pytest.approx(want, abs=1e-15)


def test_err_stays_exact_over_many_long_queries() -> None:
    # the per-query products are sums of logs over one array of every query: the rounding of
    # that sum must not grow with the number of queries before this one
    rng = random.Random(32)
    pool = [f"d{i}" for i in range(400)]
    qrels = {f"q{q:04d}": {d: rng.randint(0, 3) for d in rng.sample(pool, 300)} for q in range(400)}
    run = {q: rng.sample(pool, 300) for q in qrels}
    got = evaluate(qrels, run, ["ERR"])
    worst = max(abs(got[q]["ERR"] - _err(j, run[q], 3)) for q, j in qrels.items())
    assert worst < 1e-13
