"""Known-answer tests for every measure, conventions, set-level measures and bad input."""

from __future__ import annotations

import math

import pytest

from pytest_searcheval.metrics import (
    Measure,
    adversarial_resistance_rate,
    adversarial_top1_rate,
    aggregate,
    aggregate_counts,
    evaluate,
    grade0_rate_at_k,
    hard_filter_violations,
    jaccard_at_k,
    manifest,
    no_result_accuracy,
    parse_measure,
    provider_concentration,
    rbo,
)

LOG3 = math.log2(3)

# the worked example of the methodology seed: judgments {a: 3, b: 1, c: 0}
SEED_QRELS = {"q": {"a": 3, "b": 1, "c": 0}}


def test_seed_ndcg_worked_example() -> None:
    idcg = 7 + 1 / LOG3
    assert round(idcg, 3) == 7.631
    right = evaluate(SEED_QRELS, {"q": ["a", "b", "c"]}, ["nDCG@10"])["q"]["nDCG@10"]
    assert right == pytest.approx(1.0, abs=1e-12)
    swapped = evaluate(SEED_QRELS, {"q": ["b", "a", "c"]}, ["nDCG@10"])["q"]["nDCG@10"]
    assert swapped == pytest.approx((1 + 7 / LOG3) / idcg, abs=1e-12)
    assert round(swapped, 3) == 0.710
    # without a, 7 never enters the sum: DCG = 1 at best
    missing = evaluate(SEED_QRELS, {"q": ["b", "c"]}, ["nDCG@10"])["q"]["nDCG@10"]
    assert missing == pytest.approx(1 / idcg, abs=1e-12)


def test_zero_idcg_convention() -> None:
    # the seed scored 1.0 here; we leave such queries out (NaN) and trec_eval scores 0
    qrels = {"none": {"c": 0}, "q": SEED_QRELS["q"]}
    run = {"none": ["c"], "q": ["a"]}
    res = evaluate(qrels, run, ["nDCG@10", "RR", "R@20", "Judged@1"])
    assert math.isnan(res["none"]["nDCG@10"])
    assert math.isnan(res["none"]["RR"])
    assert res["none"]["Judged@1"] == 1.0
    agg = aggregate(res)
    assert agg["RR"] == 1.0
    assert aggregate_counts(res) == {"nDCG@10": 1, "RR": 1, "R@20": 1, "Judged@1": 2}
    trec = evaluate(qrels, run, ["nDCG@10", "RR"], trec_compat=True)
    assert trec["none"] == {"nDCG@10": 0.0, "RR": 0.0}
    assert aggregate(trec)["RR"] == 0.5


def test_seed_mrr_cases() -> None:
    qrels = {"first": {"a": 3}, "second": {"a": 3}, "third": {"a": 2}, "none": {"a": 3}}
    run = {"first": ["a", "x"], "second": ["x", "a"], "third": ["x", "y", "a"], "none": ["x"]}
    res = evaluate(qrels, run, ["RR"])
    assert [res[q]["RR"] for q in qrels] == [1.0, 0.5, pytest.approx(1 / 3), 0.0]
    assert aggregate(res)["RR"] == pytest.approx((1 + 0.5 + 1 / 3) / 4)


# one hand-worked query: ranking x a b c d e ; grades a=3 b=0 c=1 e=2 z=2 (z not retrieved)
HAND_QRELS = {"q": {"a": 3, "b": 0, "c": 1, "e": 2, "z": 2}}
HAND_RUN = {"q": ["x", "a", "b", "c", "d", "e"]}


@pytest.mark.parametrize(
    ("measure", "level", "expected"),
    [
        # exp gain: DCG@3 = 7/log2(3); IDCG@3 = 7 + 3/log2(3) + 3/2
        ("nDCG@3", 1, (7 / LOG3) / (7 + 3 / LOG3 + 1.5)),
        ("P@5", 1, 2 / 5),  # a, c
        ("P@5", 2, 1 / 5),  # a
        ("P@10", 1, 3 / 10),  # divides by k even though 6 were returned
        ("R@5", 1, 2 / 4),
        ("R@20", 2, 2 / 3),
        ("RR", 1, 1 / 2),
        ("RR@1", 1, 0.0),
        ("RR@2", 1, 1 / 2),
        # relevant at ranks 2, 4, 6 of R=4: (1/2 + 2/4 + 3/6) / 4
        ("AP", 1, (0.5 + 0.5 + 0.5) / 4),
        ("AP@4", 1, (0.5 + 0.5) / 4),
        ("AP", 2, (1 / 2 + 2 / 6) / 3),
        # level 1: judged non-relevant N=1 (b). a: nothing above -> 1; c: b above -> 1 - 1/1;
        # e: 1 - 1/1. bpref = 1/4
        ("bpref", 1, 1 / 4),
        # level 2: non-relevant b, c (N=2), R=3: a -> 1; e -> 1 - min(2,3)/min(3,2) = 0
        ("bpref", 2, 1 / 3),
        ("Judged@3", 1, 2 / 3),
        ("Judged@10", 1, 4 / 10),
        # Rprec: R=4, top 4 = x a b c holds a, c; at level 2, R=3, top 3 holds a
        ("Rprec", 1, 2 / 4),
        ("Rprec", 2, 1 / 3),
        ("Success@1", 1, 0.0),
        ("Success@2", 1, 1.0),
        ("P(rel=2)@5", 1, 1 / 5),  # the measure's level wins over the run's
        ("P(rel=1)@5", 2, 2 / 5),
        ("AP(rel=3)", 1, (1 / 2) / 1),  # only a (grade 3), at rank 2
        ("Bpref", 1, 1 / 4),
        # ERR, g_max 3: a (R=7/8) at rank 2, c (R=1/8) at 4, e (R=3/8) at 6
        ("ERR@3", 1, (7 / 8) / 2),
        ("ERR", 1, (7 / 8) / 2 + (1 / 8) * (1 / 8) / 4 + (1 / 8) * (7 / 8) * (3 / 8) / 6),
        # infAP, every retrieved judged document counted (x and d are outside the pool):
        # a at j=1: 1/2; c at j=3 (a, b above): 1/4 + 3/4 * 2/3 * (1+e)/(2+2e);
        # e at j=5 (a, b, c above): 1/6 + 5/6 * 3/5 * (2+e)/(3+2e); divided by R=4
        (
            "infAP",
            1,
            (
                1 / 2
                + 1 / 4
                + 3 / 4 * 2 / 3 * (1 + 1e-5) / (2 + 2e-5)
                + 1 / 6
                + 5 / 6 * 3 / 5 * (2 + 1e-5) / (3 + 2e-5)
            )
            / 4,
        ),
    ],
)
def test_hand_computed(measure: str, level: int, expected: float) -> None:
    got = evaluate(HAND_QRELS, HAND_RUN, [measure], relevance_level=level)["q"][measure]
    assert got == pytest.approx(expected, abs=1e-12)


def test_linear_gain_and_full_ndcg() -> None:
    at3 = evaluate(HAND_QRELS, HAND_RUN, ["nDCG@3"], gain="linear")["q"]["nDCG@3"]
    assert at3 == pytest.approx((3 / LOG3) / (3 + 2 / LOG3 + 1), abs=1e-12)
    assert round(at3, 3) == 0.360  # docs/metrics.md
    dcg = 3 / LOG3 + 1 / math.log2(5) + 2 / math.log2(7)
    idcg = 3 + 2 / LOG3 + 2 / 2 + 1 / math.log2(5)
    got = evaluate(HAND_QRELS, HAND_RUN, ["nDCG"], gain="linear")["q"]["nDCG"]
    assert got == pytest.approx(dcg / idcg, abs=1e-12)


def test_score_ties_break_by_doc_id_descending() -> None:
    qrels = {"q": {"a": 1}}
    res = evaluate(qrels, {"q": {"a": 1.0, "b": 1.0, "c": 0.5}}, ["RR"])
    assert res["q"]["RR"] == 0.5  # b before a


def test_negative_grades_gain_nothing_and_are_unjudged_for_bpref() -> None:
    qrels = {"q": {"a": -1, "b": 2, "c": 0}}
    res = evaluate(qrels, {"q": ["a", "c", "b"]}, ["nDCG@3", "bpref", "Judged@3"])["q"]
    assert res["nDCG@3"] == pytest.approx(3 / 2 / 3)  # gain 3 at rank 3, ideal 3
    assert res["bpref"] == 0.0  # c is above b: 1 - min(1,1)/min(1,1)
    assert res["Judged@3"] == 1.0


def test_query_absent_from_run_scores_zero_and_run_only_query_is_ignored() -> None:
    res = evaluate({"q": {"a": 1}}, {"other": ["a"]}, ["nDCG@10", "P@5"])
    assert res == {"q": {"nDCG@10": 0.0, "P@5": 0.0}}


def test_manifest_states_conventions() -> None:
    m = manifest(measures=["nDCG@10", "RR"], relevance_level=2)
    assert m["gain"].startswith("2^grade - 1")
    assert m["relevance_level"] == 2
    assert "NaN" in m["queries_without_relevant_documents"]
    assert "measure_relevance_levels" not in m and "err_stopping_probability" not in m
    own = manifest(measures=["Bpref", "P(rel=2)@5", "ERR@10"], max_grade=4)
    assert own["measures"] == ["Bpref", "P(rel=2)@5", "ERR@10"]
    assert own["measure_relevance_levels"] == {"P(rel=2)@5": 2}
    assert own["err_stopping_probability"] == "(2^grade - 1) / 2^g_max, g_max = 4"
    t = manifest(trec_compat=True)
    assert t["gain"].startswith("grade")
    assert "32-bit" in t["ties"] and "32-bit" not in m["ties"]
    assert "-c" in t["queries_without_relevant_documents"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nDCG@10", Measure("nDCG", 10)),
        ("nDCG", Measure("nDCG")),
        ("AP@1", Measure("AP", 1)),
        ("bpref", Measure("bpref")),
        ("Judged@7", Measure("Judged", 7)),
        ("Rprec", Measure("Rprec")),
        ("Success@10", Measure("Success", 10)),
        ("ERR@20", Measure("ERR", 20)),
        ("infAP", Measure("infAP")),
        ("P(rel=2)@5", Measure("P", 5, rel=2)),
        ("AP(rel=2)", Measure("AP", None, rel=2)),
        ("RR(rel=3)@10", Measure("RR", 10, rel=3)),
    ],
)
def test_parse_measure(text: str, expected: Measure) -> None:
    assert parse_measure(text) == expected
    assert str(expected) == text


def test_ir_measures_spellings_are_the_same_measures() -> None:
    assert parse_measure("Bpref") == parse_measure("bpref") == Measure("bpref")
    assert parse_measure("Bpref@10") == Measure("bpref", 10)
    assert parse_measure(" P( rel = 2 )@5 ") == Measure("P", 5, rel=2)


def test_values_are_keyed_by_the_name_as_given() -> None:
    res = evaluate(HAND_QRELS, HAND_RUN, ["Bpref", "bpref", " RR ", Measure("P", 5, rel=2)])
    assert list(res["q"]) == ["Bpref", "bpref", "RR", "P(rel=2)@5"]
    assert res["q"]["Bpref"] == res["q"]["bpref"] == pytest.approx(1 / 4)
    per_query = {"q": res["q"], "r": {**res["q"], "Bpref": 0.75}}
    assert aggregate(per_query, ["Bpref"]) == {"Bpref": pytest.approx(0.5)}


def test_settings_accept_ir_measures_names() -> None:
    from pytest_searcheval.settings import _measures

    assert _measures(("Bpref", "P(rel=2)@5", "Rprec", "Success@10", "ERR@10", "infAP")) is None
    problem = _measures(("nDCG(rel=2)@10",))
    assert problem is not None and "takes no relevance level" in problem


def test_with_depth_cuts_what_may_be_cut() -> None:
    from pytest_searcheval.metrics import with_depth

    assert with_depth("AP(rel=2)", 20) == "AP(rel=2)@20"
    assert with_depth("Bpref", 20) == "Bpref@20"
    assert with_depth("P@5", 20) == "P@5"
    assert with_depth("Rprec", 20) == "Rprec"
    assert with_depth("AP", None) == "AP"


@pytest.mark.parametrize(
    ("measure", "fragment"),
    [
        ("ndcg@10", "unknown measure"),
        ("nDCG@0", "positive"),
        ("P@-3", "positive"),
        ("P", "needs a cut-off"),
        ("R@x", "not an integer"),
        ("Rprec@5", "takes no cut-off"),
        ("Success", "needs a cut-off"),
        ("nDCG(rel=2)@10", "nDCG takes no relevance level"),
        ("ERR(rel=2)@10", "ERR takes no relevance level"),
        ("P(rel=0)@5", "rel must be a positive integer"),
        ("P(rel=two)@5", "rel 'two' is not an integer"),
        ("P(level=2)@5", "unknown parameter 'level=2'"),
        ("P(rel=1,rel=2)@5", "rel is given twice"),
        ("P()@5", "empty parameter list"),
        ("P@5(rel=2)", "unknown measure"),
    ],
)
def test_bad_measure_names_the_measure(measure: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as err:
        evaluate({"q": {"a": 1}}, {"q": ["a"]}, [measure])
    assert repr(measure) in str(err.value)


def test_a_cut_measure_equals_the_measure_of_the_cut_ranking() -> None:
    # AP@k, RR@k and bpref@k score the ranking cut at k: the same as the uncut measure on the
    # first k results (AP@k still divides by every relevant document, as map_cut does).
    qrels = {"q": {"a": 1, "b": 0, "c": 1, "d": 0, "e": 1}}
    ranking = ["b", "a", "d", "c", "x", "e"]
    for k in (1, 2, 3, 4, 6):
        cut = evaluate(qrels, {"q": ranking}, [f"AP@{k}", f"RR@{k}", f"bpref@{k}"])["q"]
        whole = evaluate(qrels, {"q": ranking[:k]}, ["AP", "RR", "bpref"])["q"]
        assert cut == {f"{m}@{k}": whole[m] for m in ("AP", "RR", "bpref")}


def test_a_conftest_can_register_a_measure() -> None:
    from pytest_searcheval import metrics

    @metrics.measure("Hits", "required")
    def _hits(calc, k):  # type: ignore[no-untyped-def]
        import numpy as np

        return calc._count(calc.rel & (calc.rank < k)), np.zeros(calc.n, dtype=bool)

    try:
        assert evaluate({"q": {"a": 1, "b": 1}}, {"q": ["a", "x", "b"]}, ["Hits@2"]) == {
            "q": {"Hits@2": 1.0}
        }
    finally:
        del metrics.REGISTRY["Hits"]


def test_a_custom_measure_gets_a_public_calc_at_its_own_level() -> None:
    import numpy as np

    from pytest_searcheval import metrics

    seen: list[type] = []

    @metrics.measure("Hits", "required", relevance=True, aliases=("hits",))
    def _hits(calc: metrics.Calc, k: int | None) -> tuple[np.ndarray, np.ndarray]:
        seen.append(type(calc))
        assert k is not None
        return calc.count(calc.rel & calc.cut(k)), np.zeros(calc.n, dtype=bool)

    try:
        qrels = {"q": {"a": 1, "b": 2}}
        res = evaluate(qrels, {"q": ["a", "b"]}, ["Hits@2", "Hits(rel=2)@2", "hits@1"])
        assert res == {"q": {"Hits@2": 2.0, "Hits(rel=2)@2": 1.0, "hits@1": 1.0}}
        assert seen and all(t is metrics.Calc for t in seen)
        assert metrics._Calc is metrics.Calc
    finally:
        del metrics.REGISTRY["Hits"], metrics.REGISTRY["hits"]


def test_a_level_override_with_no_relevant_document_is_undefined() -> None:
    # grade 3 exists only in q1: P(rel=3)@5 is NaN for q2 by default, 0 in trec-compat mode
    qrels = {"q1": {"a": 3}, "q2": {"a": 1}}
    run = {"q1": ["a"], "q2": ["a"]}
    res = evaluate(qrels, run, ["P(rel=3)@5", "P@5"])
    assert res["q1"]["P(rel=3)@5"] == pytest.approx(0.2)
    assert math.isnan(res["q2"]["P(rel=3)@5"]) and res["q2"]["P@5"] == pytest.approx(0.2)
    assert evaluate(qrels, run, ["P(rel=3)@5"], trec_compat=True)["q2"]["P(rel=3)@5"] == 0.0


@pytest.mark.parametrize(
    ("qrels", "run", "fragment"),
    [
        ({"q7": {"a": 1.5}}, {"q7": ["a"]}, r"'q7', document 'a': grade 1.5 is not an integer"),
        ({"q7": {"a": None}}, {"q7": ["a"]}, r"'q7', document 'a': grade is missing"),
        ({"q7": {"a": True}}, {"q7": ["a"]}, r"'q7', document 'a': grade True"),
        ({"q7": {"a": 1}}, {"q7": {"a": math.nan}}, r"'q7', document 'a': score nan"),
        ({"q7": {"a": 1}}, {"q7": {"b": 1.0, "a": math.inf}}, r"document 'a': score inf"),
        ({"q7": {"a": 1}}, {"q7": {"a": "high"}}, r"document 'a': score 'high' is not a number"),
        ({"q7": {"a": 1}}, {"q7": ["a", "b", "a"]}, r"'q7', document 'a': duplicate .* rank 3"),
        ({"q7": {"a": 1}}, {"q7": "a"}, r"query 'q7': expected"),
    ],
)
def test_bad_input_names_query_and_document(
    qrels: dict[str, dict[str, int]], run: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        evaluate(qrels, run, ["RR"])  # type: ignore[arg-type]


def test_exp_gain_is_refused_in_trec_mode() -> None:
    with pytest.raises(ValueError, match="linear"):
        evaluate({"q": {"a": 1}}, {"q": ["a"]}, ["RR"], gain="exp", trec_compat=True)


# ---- set-level measures


def test_no_result_accuracy() -> None:
    res = no_result_accuracy(
        {"u1": [], "u2": ["a"], "a1": ["b"], "a2": []}, unanswerable={"u1", "u2"}
    )
    assert (res.correct_empty, res.unanswerable, res.accuracy) == (1, 2, 0.5)
    assert (res.false_empty, res.answerable, res.false_empty_rate) == (1, 2, 0.5)
    with pytest.raises(ValueError, match="'u9'"):
        no_result_accuracy({"u1": []}, unanswerable={"u9"})


def test_hard_filter_violations() -> None:
    bad = {("q1", "b"), ("q2", "a")}
    found = hard_filter_violations({"q1": ["a", "b"], "q2": ["c"]}, lambda q, d: (q, d) in bad)
    assert [(v.query_id, v.doc_id, v.rank) for v in found] == [("q1", "b", 2)]


def test_grade0_rate_pools_shown_results() -> None:
    qrels = {"q1": {"a": 0, "b": 2}, "q2": {"c": -1}}
    rate = grade0_rate_at_k(qrels, {"q1": ["a", "b", "x"], "q2": ["c"]}, k=2)
    assert rate == pytest.approx(2 / 3)  # a and c of the 3 shown (a, b, c)
    assert math.isnan(grade0_rate_at_k(qrels, {"q1": []}, k=2))


def test_adversarial_rates() -> None:
    results = {"q1": ["stuffed", "real"], "q2": ["real2", "dup2"], "q3": []}
    assert adversarial_top1_rate(results, {"stuffed", "dup2"}) == pytest.approx(1 / 3)
    pairs = {"q1": [("real", "stuffed")], "q2": [("real2", "dup2")], "q3": [("r", "s")]}
    assert adversarial_resistance_rate(results, pairs) == pytest.approx(1 / 3)


def test_provider_concentration() -> None:
    providers = {"a": "P", "b": "P", "c": "Q", "d": "R"}
    c = provider_concentration({"q1": ["a", "b", "c", "d"], "q2": ["a"], "q3": []}, providers, 4)
    assert c.queries == 2
    assert c.top_share == pytest.approx((0.5 + 1.0) / 2)
    assert c.hhi == pytest.approx(((0.25 + 0.0625 + 0.0625) + 1.0) / 2)
    with pytest.raises(ValueError, match="document 'zz'"):
        provider_concentration({"q": ["zz"]}, providers, 3)


def test_jaccard_at_k() -> None:
    assert jaccard_at_k(["a", "b", "c"], ["b", "a", "d"], 2) == 1.0
    assert jaccard_at_k(["a", "b", "c"], ["b", "a", "d"], 3) == 0.5
    assert jaccard_at_k([], [], 5) == 1.0
    with pytest.raises(ValueError, match="positive"):
        jaccard_at_k(["a"], ["a"], 0)


def _rbo_ext_even(a: list[str], b: list[str], p: float) -> float:
    # equation 30 of Webber et al. for equal lengths, written from the definition
    k = len(a)
    agree = [len(set(a[:d]) & set(b[:d])) / d for d in range(1, k + 1)]
    return agree[-1] * p**k + (1 - p) / p * sum(agree[d - 1] * p**d for d in range(1, k + 1))


def test_rbo() -> None:
    assert rbo(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0, abs=1e-12)
    assert rbo(["a", "b"], ["c", "d"]) == 0.0
    assert rbo([], []) == 1.0 and rbo(["a"], []) == 0.0
    a, b = ["a", "b", "c", "d", "e"], ["b", "a", "e", "f", "c"]
    assert rbo(a, b, 0.8) == pytest.approx(_rbo_ext_even(a, b, 0.8), abs=1e-12)
    # uneven: S=[a, b], L=[a, c, b]; X1=1, X2=1, X3=2, X_s=1, s=2, l=3, p=0.5
    p = 0.5
    body = 1 * p + 1 / 2 * p**2 + 2 / 3 * p**3 + 1 * (3 - 2) / (2 * 3) * p**3
    expected = (1 - p) / p * body + ((2 - 1) / 3 + 1 / 2) * p**3
    assert rbo(["a", "b"], ["a", "c", "b"], p) == pytest.approx(expected, abs=1e-12)
    assert rbo(["a", "c", "b"], ["a", "b"], p) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="duplicate"):
        rbo(["a", "a"], ["a"])


def test_aggregate_checks_rows_and_handles_all_undefined() -> None:
    per_query = {"q1": {"RR": 1.0, "P@5": math.nan}, "q2": {"RR": 0.0, "P@5": math.nan}}
    assert aggregate(per_query, ["RR"]) == {"RR": 0.5}
    assert math.isnan(aggregate(per_query)["P@5"])
    assert aggregate_counts(per_query) == {"RR": 2, "P@5": 0}
    with pytest.raises(ValueError, match="query 'q2' has no value for AP"):
        aggregate({"q1": {"AP": 1.0}, "q2": {}})


def test_measure_objects_duplicates_and_empty_measure_list() -> None:
    res = evaluate(HAND_QRELS, HAND_RUN, [Measure("RR"), "RR", Measure("P", 5)])
    assert list(res["q"]) == ["RR", "P@5"]
    with pytest.raises(ValueError, match="at least one"):
        evaluate(HAND_QRELS, HAND_RUN, [])
    with pytest.raises(ValueError, match="relevance_level"):
        evaluate(HAND_QRELS, HAND_RUN, ["RR"], relevance_level=True)
