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
]


def _reference(judged: dict[str, int], ranking: list[str], measure: str, level: int) -> float:
    name, _, raw_k = measure.partition("@")
    k = int(raw_k) if raw_k else len(ranking)
    top = ranking[:k]
    relevant = {d for d, g in judged.items() if g >= level}
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
    if name == "AP":
        hits, total = 0, 0.0
        for i, d in enumerate(top):
            if d in relevant:
                hits += 1
                total += hits / (i + 1)
        return total / len(relevant)
    assert name == "bpref"
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
