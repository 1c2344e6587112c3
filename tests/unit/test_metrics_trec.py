"""trec_compat mode against pytrec_eval (trec_eval's own code) on seeded random inputs."""

from __future__ import annotations

import math
import random

import pytest

from pytest_searcheval.metrics import evaluate

pytrec_eval = pytest.importorskip("pytrec_eval")

# our measure -> pytrec_eval measure
TREC_NAMES = {
    "nDCG@1": "ndcg_cut_1",
    "nDCG@5": "ndcg_cut_5",
    "nDCG@10": "ndcg_cut_10",
    "nDCG": "ndcg",
    "P@1": "P_1",
    "P@5": "P_5",
    "P@20": "P_20",
    "R@5": "recall_5",
    "R@20": "recall_20",
    "RR": "recip_rank",
    "AP": "map",
    "AP@5": "map_cut_5",
    "AP@20": "map_cut_20",
    "bpref": "bpref",
    "Bpref": "bpref",
    "Rprec": "Rprec",
    "Success@1": "success_1",
    "Success@5": "success_5",
    "Success@10": "success_10",
    "infAP": "infAP",
}
TREC_MEASURES = {
    "ndcg_cut.1,5,10",
    "ndcg",
    "P.1,5,20",
    "recall.5,20",
    "recip_rank",
    "map",
    "map_cut.5,20",
    "bpref",
    "Rprec",
    "success.1,5,10",
    "infAP",
}


def _random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rng = random.Random(seed)
    pool = [f"d{i:03d}" for i in range(60)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(40):
        qid = f"q{q}"
        judged = rng.sample(pool, rng.randint(1, 25))
        # grades include negatives (judged, but unjudged for bpref) and all-zero queries
        top = 0 if q % 9 == 0 else 3
        qrels[qid] = {d: rng.randint(-1, top) for d in judged}
        if q % 11 == 5:
            continue  # query absent from the run
        retrieved = rng.sample(pool, rng.randint(0, 45))
        # few distinct scores: many ties, broken by doc id descending
        levels = rng.choice([3, 8, 1000])
        run[qid] = {d: float(rng.randint(0, levels)) / 4.0 for d in retrieved}
    run["only-in-run"] = {"d001": 1.0}
    return qrels, run


def _trec_order(ranking: dict[str, float]) -> list[str]:
    return sorted(ranking, key=lambda d: (-ranking[d], [-ord(c) for c in d]))


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_pytrec_eval(seed: int, level: int) -> None:
    qrels, run = _random_case(seed)
    ours = evaluate(qrels, run, list(TREC_NAMES), relevance_level=level, trec_compat=True)
    ev = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=level)
    theirs = ev.evaluate(run)
    assert set(ours) == set(qrels)
    checked = 0
    for qid in qrels:
        for name, trec in TREC_NAMES.items():
            # trec_eval -c: a query absent from the run scores 0
            expected = theirs[qid][trec] if qid in theirs else 0.0
            assert ours[qid][name] == pytest.approx(expected, abs=1e-9, rel=0), (qid, name)
            checked += 1
    assert checked == len(qrels) * len(TREC_NAMES)
    assert any(qid not in run for qid in qrels)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_rr_at_k_is_recip_rank_of_truncated_run(k: int) -> None:
    qrels, run = _random_case(7)
    ours = evaluate(qrels, run, [f"RR@{k}"], relevance_level=2, trec_compat=True)
    cut = {q: {d: r[d] for d in _trec_order(r)[:k]} for q, r in run.items()}
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=2).evaluate(cut)
    for qid in qrels:
        expected = theirs[qid]["recip_rank"] if qid in theirs else 0.0
        assert math.isclose(ours[qid][f"RR@{k}"], expected, abs_tol=1e-12)


def test_judged_at_k_is_precision_with_every_judgment_relevant() -> None:
    qrels, run = _random_case(8)
    ours = evaluate(qrels, run, ["Judged@5", "Judged@20"], trec_compat=True)
    # grades shifted to >= 1 with relevance level 1: trec_eval's P@k counts every judged document
    shifted = {q: {d: g + 2 for d, g in j.items()} for q, j in qrels.items()}
    theirs = pytrec_eval.RelevanceEvaluator(shifted, {"P.5,20"}, relevance_level=1).evaluate(run)
    for qid in qrels:
        for k in (5, 20):
            expected = theirs[qid][f"P_{k}"] if qid in theirs else 0.0
            assert math.isclose(ours[qid][f"Judged@{k}"], expected, abs_tol=1e-12)


def test_trec_order_ranked_list_gives_same_values_as_scores() -> None:
    qrels, run = _random_case(9)
    names = list(TREC_NAMES)
    from_scores = evaluate(qrels, run, names, trec_compat=True)
    from_lists = evaluate(
        qrels, {q: _trec_order(r) for q, r in run.items()}, names, trec_compat=True
    )
    assert from_scores == from_lists


# measures that take a relevance level of their own, written as ir_measures writes them
BINARY = {
    "P(rel={rel})@5": "P_5",
    "R(rel={rel})@20": "recall_20",
    "RR(rel={rel})": "recip_rank",
    "AP(rel={rel})": "map",
    "AP(rel={rel})@5": "map_cut_5",
    "bpref(rel={rel})": "bpref",
    "Rprec(rel={rel})": "Rprec",
    "Success(rel={rel})@5": "success_5",
    "infAP(rel={rel})": "infAP",
}


@pytest.mark.parametrize("run_level", [1, 2, 3])
@pytest.mark.parametrize("seed", [4, 5])
def test_measure_level_overrides_the_run_level(seed: int, run_level: int) -> None:
    # P(rel=2)@5 in a run at any level equals trec_eval -l 2 P_5, per query
    qrels, run = _random_case(seed)
    for rel in (1, 2, 3):
        names = {name.format(rel=rel): trec for name, trec in BINARY.items()}
        ours = evaluate(qrels, run, list(names), relevance_level=run_level, trec_compat=True)
        ev = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=rel)
        theirs = ev.evaluate(run)
        for qid in qrels:
            for name, trec in names.items():
                expected = theirs[qid][trec] if qid in theirs else 0.0
                assert ours[qid][name] == pytest.approx(expected, abs=1e-9, rel=0), (qid, name)


def test_infap_on_a_sampled_pool() -> None:
    # many retrieved documents outside the qrels and many pooled-but-unjudged (-1) ones: the
    # three groups of trec_eval's infAP all matter
    rng = random.Random(12)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(60):
        pool = [f"p{q}-{i}" for i in range(40)]
        qrels[f"q{q}"] = {d: rng.choice([-1, -1, 0, 0, 1, 2]) for d in pool[:25]}
        run[f"q{q}"] = {d: rng.random() for d in rng.sample(pool, rng.randint(1, 40))}
    ours = evaluate(qrels, run, ["infAP", "AP"], trec_compat=True)
    theirs = pytrec_eval.RelevanceEvaluator(qrels, {"infAP", "map"}).evaluate(run)
    differs = 0
    for qid in qrels:
        assert ours[qid]["infAP"] == pytest.approx(theirs[qid]["infAP"], abs=1e-9, rel=0), qid
        differs += abs(ours[qid]["infAP"] - ours[qid]["AP"]) > 1e-3
    assert differs > 10  # the inference changed the numbers: this is not AP under another name


def test_scores_tie_as_trec_eval_holds_them_in_32_bits() -> None:
    # dense scores a few 1e-9 apart are distinct doubles but one C float in trec_eval, whose
    # tie order (doc id descending) then decides
    rng = random.Random(13)
    pool = [f"d{i:02d}" for i in range(30)]
    qrels = {f"q{q}": {d: rng.randint(0, 2) for d in rng.sample(pool, 12)} for q in range(40)}
    run = {
        q: {d: 0.8 + rng.randint(0, 5) * 1e-9 + rng.randint(0, 3) * 1e-3 for d in pool}
        for q in qrels
    }
    names = {"RR": "recip_rank", "P@5": "P_5", "AP": "map", "nDCG@10": "ndcg_cut_10"}
    ours = evaluate(qrels, run, list(names), trec_compat=True)
    theirs = pytrec_eval.RelevanceEvaluator(
        qrels, {"recip_rank", "P.5", "map", "ndcg_cut.10"}
    ).evaluate(run)
    for qid in qrels:
        for name, trec in names.items():
            assert ours[qid][name] == pytest.approx(theirs[qid][trec], abs=1e-9, rel=0), (qid, name)
    # the default mode compares the doubles as given
    default = evaluate(qrels, run, ["RR"])
    assert any(default[q]["RR"] != ours[q]["RR"] for q in qrels if not math.isnan(default[q]["RR"]))
