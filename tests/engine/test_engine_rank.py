"""Unit tests of the ranking pieces that need neither PostgreSQL nor the embedding model."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from pytest_searcheval.engine import fusion, index, threshold
from pytest_searcheval.engine.bm25 import BM25FParams, idf
from pytest_searcheval.engine.fusion import FusionParams
from pytest_searcheval.engine.threshold import NoResultRule, Sample

# Reference outputs of Porter's published algorithm (tartarus.org voc.txt / output.txt).
PORTER = {
    "caresses": "caress",
    "ponies": "poni",
    "cats": "cat",
    "feed": "feed",
    "agreed": "agre",
    "plastered": "plaster",
    "motoring": "motor",
    "sing": "sing",
    "conflated": "conflat",
    "hopping": "hop",
    "filing": "file",
    "happy": "happi",
    "relational": "relat",
    "conditional": "condit",
    "valenci": "valenc",
    "digitizer": "digit",
    "generalization": "gener",
    "triplicate": "triplic",
    "hopeful": "hope",
    "goodness": "good",
    "revival": "reviv",
    "allowance": "allow",
    "adjustable": "adjust",
    "adoption": "adopt",
    "controll": "control",
    "probate": "probat",
    "electricity": "electr",
    "generous": "gener",
}


@pytest.mark.parametrize(("word", "expected"), sorted(PORTER.items()))
def test_porter_matches_reference(word: str, expected: str) -> None:
    assert index.stem(word) == expected


def test_analyzer_normalises_splits_stops_and_stems() -> None:
    assert index.analyze("The Café's FORECASTS for get_weather-daily /v1/") == [
        "cafe",
        "forecast",
        "get",
        "weather",
        "daili",
        "v1",
    ]
    # full-width digits and letters fold under NFKC
    assert index.analyze("\uff21\uff30\uff29 \uff12\uff10\uff12\uff16") == ["api", "2026"]
    assert index.analyze("the and of") == []


def test_field_texts_use_url_path_tool_name_and_never_the_sidecar() -> None:
    texts = index.field_texts(
        "Title",
        "Body",
        {"provider": "Skyline Labs", "tags": ["weather", 3]},
        {"resource": "https://api.skyline.example/v1/forecast/daily?x=1"},
    )
    assert texts["meta"] == "Skyline Labs weather"
    assert texts["url"].split() == ["api", "skyline", "/v1/forecast/daily"]
    assert texts["tool"] == ""
    assert "sidecar" not in " ".join(texts.values())
    mcp = {
        "resource": "mcp://mcp.wx.example/tools/get_forecast",
        "type": "mcp",
        "extensions": {"bazaar": {"info": {"input": {"type": "mcp", "toolName": "get_forecast"}}}},
    }
    texts = index.field_texts("Title", "Body", {}, mcp)
    assert texts["tool"] == "get_forecast mcp://mcp.wx.example"
    # an HTTP listing's extension carries no tool name
    http = {
        "resource": "https://x.example",
        "extensions": {"bazaar": {"info": {"input": {"type": "http"}}}},
    }
    assert index.field_texts("T", "B", {}, http)["tool"] == ""


def test_bm25f_params_are_validated() -> None:
    with pytest.raises(ValueError, match="b\\['text'\\]"):
        BM25FParams(b={"text": 1.5})
    with pytest.raises(ValueError, match="k1"):
        BM25FParams(k1=-1)
    names, weights, bs = BM25FParams(weights={"title": 2.0, "text": 0.0}).field_arrays()
    assert names == ["title"] and weights == [2.0] and len(bs) == 1


def test_idf_is_non_negative_and_decreasing() -> None:
    assert idf(100, 100) > 0
    assert idf(100, 1) > idf(100, 10) > idf(100, 90)


def test_rrf_weighted_formula() -> None:
    params = FusionParams(k=60, weights={"lexical": 2.0, "semantic": 1.0})
    fused = dict(fusion.rrf({"lexical": ["a", "b"], "semantic": ["b", "c"]}, params))
    assert fused["a"] == pytest.approx(2 / 61)
    assert fused["b"] == pytest.approx(2 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 62)


def test_lexical_credit_scales_each_listing_by_its_coverage() -> None:
    params = FusionParams(k=60, weights={"lexical": 1.0, "semantic": 1.0}, coverage_power=1.0)
    lists = {"lexical": ["a", "b"], "semantic": ["c"]}
    fused = dict(fusion.rrf(lists, params, coverage={"a": 0.25, "b": 1.0}))
    assert fused["a"] == pytest.approx(0.25 / 61)
    assert fused["b"] == pytest.approx(1.0 / 62)
    assert fused["c"] == pytest.approx(1 / 61)
    # no coverage given: the credit is off, the plain weighted RRF
    assert dict(fusion.rrf(lists, params))["a"] == pytest.approx(1 / 61)


@pytest.mark.parametrize(
    ("best", "factor"), [(0.1, 0.0), (0.3, 0.0), (0.45, 0.5), (0.6, 1.0), (0.9, 1.0)]
)
def test_lexical_gate_ramps_with_the_best_coverage(best: float, factor: float) -> None:
    params = FusionParams(
        k=60,
        weights={"lexical": 1.0, "semantic": 1.0},
        gate_low=0.3,
        gate_high=0.6,
        coverage_power=0.0,
    )
    assert fusion.gate(params, best) == pytest.approx(factor)
    fused = dict(fusion.rrf({"lexical": ["a"], "semantic": ["c"]}, params, coverage={"a": best}))
    assert fused.get("a", 0.0) == pytest.approx(factor / 61)


@pytest.mark.parametrize(
    "bad", [{"gate_low": 0.7, "gate_high": 0.5}, {"gate_high": 1.5}, {"coverage_power": -1.0}]
)
def test_fusion_params_refuse_a_bad_gate(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="FusionParams"):
        FusionParams(**bad)


def test_prior_reorders_ties_only() -> None:
    params = FusionParams(k=60)
    # a leads b by one rank in one list and they tie elsewhere: the best prior cannot flip it.
    priors = {"a": 0.0, "b": 1.0}
    fused = fusion.rrf({"lexical": ["a", "b"], "semantic": ["x", "y"]}, params, priors)
    assert [d for d, _ in fused].index("a") < [d for d, _ in fused].index("b")
    # exact tie (a first in one list, b first in the other): the prior decides.
    tied = fusion.rrf({"lexical": ["a", "b"], "semantic": ["b", "a"]}, params, priors)
    assert tied[0][0] == "b"
    assert params.prior_eps < 1 / 61 - 1 / 62


def test_prior_signal_uses_liveness_and_settlements_only() -> None:
    top = fusion.max_settlements([{"settlements": 999}, {"settlements": 9}, {}])
    assert top == 999
    live = fusion.prior_signal({"liveness": "live", "settlements": 999}, top)
    stale = fusion.prior_signal({"liveness": "stale", "settlements": 0}, top)
    assert live == pytest.approx(1.0) and stale == 0.0
    with_category = fusion.prior_signal(
        {"liveness": "live", "settlements": 999, "category": "weather"}, top
    )
    assert with_category == live
    mid = fusion.prior_signal({"liveness": "degraded", "settlements": 9}, top)
    assert mid == pytest.approx((0.5 + math.log1p(9) / math.log1p(999)) / 2)


def _samples() -> list[Sample]:
    pos = [Sample(f"a{i}", 0.45 + 0.02 * i, 0.6, True) for i in range(20)]
    pos.append(Sample("hard", 0.20, 0.1, True))  # an answerable query that looks unanswerable
    neg = [Sample(f"n{i}", 0.10 + 0.02 * i, 0.2, False) for i in range(10)]
    neg.append(Sample("tricky", 0.6, 0.9, False))
    return pos + neg


def test_threshold_fit_respects_answerable_loss_budget() -> None:
    samples = _samples()
    strict = threshold.fit_profile("semantic", samples, max_answerable_loss=0.0)
    assert strict.suppressed_answerable == []
    assert strict.rule.tau <= 0.20
    loose = threshold.fit_profile("semantic", samples, max_answerable_loss=0.05)
    assert loose.suppressed_answerable == ["hard"]
    assert loose.answered_no_result == ["tricky"]
    assert loose.no_result_accuracy == pytest.approx(10 / 11)
    # the cut sits in the middle of the gap between classes
    assert 0.28 < loose.rule.tau < 0.45


def test_threshold_hybrid_uses_both_features() -> None:
    samples = [
        Sample("a", 0.30, 0.9, True),
        Sample("b", 0.50, 0.1, True),
        Sample("n", 0.35, 0.0, False),
        Sample("m", 0.25, 0.3, False),
    ]
    fit = threshold.fit_profile("hybrid", samples, max_answerable_loss=0.0)
    assert fit.no_result_accuracy == 1.0 and fit.answerable_kept == 1.0
    assert 0 < fit.rule.w_cos < 1


def test_threshold_rerank_profile_can_rely_on_the_cross_encoder() -> None:
    """Only the reranker score separates these; hybrid_rerank finds it, hybrid cannot."""
    samples = [
        Sample("a", 0.30, 0.2, True, rerank=0.9),
        Sample("b", 0.40, 0.1, True, rerank=0.8),
        Sample("n", 0.45, 0.3, False, rerank=0.1),
        Sample("m", 0.35, 0.2, False, rerank=0.2),
    ]
    fit = threshold.fit_profile("hybrid_rerank", samples, max_answerable_loss=0.0)
    assert fit.no_result_accuracy == 1.0 and fit.answerable_kept == 1.0
    assert fit.rule.w_rerank > 0
    assert threshold.fit_profile("hybrid", samples, max_answerable_loss=0.0).no_result_accuracy < 1
    # profiles without the feature never weigh it
    assert threshold.fit_profile("semantic", samples, max_answerable_loss=0.0).rule.w_rerank == 0


def test_threshold_grid_is_the_simplex_over_the_used_features() -> None:
    grid = threshold._grid((True, True, True), 0.5)
    assert sorted(grid) == sorted(
        [
            (0.0, 0.0, 1.0),
            (0.0, 0.5, 0.5),
            (0.0, 1.0, 0.0),
            (0.5, 0.0, 0.5),
            (0.5, 0.5, 0.0),
            (1.0, 0.0, 0.0),
        ]
    )
    assert threshold._grid((False, True, False), 0.05) == [(0.0, 1.0, 0.0)]


def test_threshold_grid_weights_sum_to_one_exactly_as_two_feature_rules_always_did() -> None:
    assert threshold._grid((True, True, False), 0.05) == [
        (i / 20, 1 - i / 20, 0.0) for i in range(21)
    ]
    for w in threshold._grid((True, True, True), 0.05):
        assert sum(w) == pytest.approx(1.0) and min(w) >= 0


def test_threshold_fit_treats_a_missing_rerank_score_as_no_evidence() -> None:
    samples = [
        Sample("a", 0.5, 0.5, True, rerank=0.9),
        Sample("b", 0.6, 0.4, True, rerank=0.8),
        Sample("n", 0.55, 0.5, False, rerank=0.1),
        Sample("filtered-out", 0.55, 0.5, False, rerank=None),
    ]
    fit = threshold.fit_profile("hybrid_rerank", samples, max_answerable_loss=0.0)
    assert fit.no_result_accuracy == 1.0 and fit.answerable_kept == 1.0
    assert fit.rule.w_rerank > 0 and fit.rule.suppress(0.99, 0.99, None)
    assert fit.rule.confidence(0.99, 0.99, None) == -math.inf


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"rules": {"hybrid": {"w_cos": 1, "w_cov": 0, "tau": 0.3, "w_rr": 1}}}', "'w_rr'"),
        ('{"rules": {"hybrid": {"w_cos": NaN, "w_cov": 0, "tau": 0.3}}}', "finite"),
        ('{"rules": {"hybrid": {"w_cos": -1, "w_cov": 0, "tau": 0.3}}}', ">= 0"),
        ('{"rules": {"hybrid": {"w_cos": "1", "w_cov": 0, "tau": 0.3}}}', "a number"),
        ('{"rules": {"hybrid": {"w_cos": 1, "tau": 0.3}}}', "missing 'w_cov'"),
        ('{"rules": {"hybrid": {"w_cos": 0, "w_cov": 0, "tau": 0, "w_rerank": 1}}}', "w_rerank"),
        ('{"rules": {"semantic": {"w_cos": 0, "w_cov": 1, "tau": 0.3}}}', "semantic"),
        ('{"rules": {"bm42": {"w_cos": 1, "w_cov": 0, "tau": 0.3}}}', "unknown profile 'bm42'"),
        ('{"rules": []}', "expected {'rules'"),
        ("{", "not JSON"),
    ],
)
def test_threshold_rule_files_are_validated(body: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"rules\.json") as info:
        threshold.rules_from_json(body, source="rules.json")
    assert message in str(info.value)


def test_threshold_needs_both_classes_and_round_trips() -> None:
    with pytest.raises(ValueError, match="no-result"):
        threshold.fit_profile("lexical", [Sample("a", None, 0.5, True)])
    rules = {
        "hybrid": NoResultRule(0.7, 0.3, 0.31),
        "hybrid_rerank": NoResultRule(0.2, 0, 0.4, 0.8),
    }
    assert threshold.rules_from_json(threshold.rules_to_json(rules)) == rules
    # rules written before the reranker feature existed still load (w_rerank = 0)
    old = '{"rules": {"hybrid": {"w_cos": 0.7, "w_cov": 0.3, "tau": 0.31}}}'
    assert threshold.rules_from_json(old) == {"hybrid": rules["hybrid"]}
    with pytest.raises(ValueError, match=r"x\.json"):
        threshold.rules_from_json("{}", source="x.json")
    assert rules["hybrid"].suppress(0.2, 0.3) and not rules["hybrid"].suppress(0.4, 0.3)


def test_threshold_loss_is_measured_in_answerable_recall() -> None:
    """An answerable query whose results hold nothing relevant (value 0) costs no recall."""
    samples = [
        Sample("good", 0.7, 0.8, True, 1.0),
        Sample("fails-anyway", 0.2, 0.1, True, 0.0),
        Sample("n1", 0.25, 0.1, False),
        Sample("n2", 0.3, 0.2, False),
    ]
    fit = threshold.fit_profile("semantic", samples, max_answerable_loss=0.0)
    assert fit.no_result_accuracy == 1.0 and fit.recall_kept == 1.0
    assert fit.suppressed_answerable == ["fails-anyway"] and fit.answerable_kept == 0.5
    assert threshold.recall_at(["a", "b", "c"], ["c", "z"], k=2) == 0.0
    assert threshold.recall_at(["a", "b", "c"], ["c", "z"], k=3) == 0.5


def test_document_records_are_validated_with_the_field_named() -> None:
    from pytest_searcheval.engine.core import document_from_record, embedding_text

    doc = document_from_record(
        {"id": "a", "title": "T", "text": "B", "fields": {"tags": ["x"]}, "x402": None}
    )
    assert doc.id == "a" and doc.x402 is None and embedding_text(doc) == "T\nB\nx"
    from pytest_searcheval.collection.native import RecordError

    # the corpus loader's own check: every bad field is named
    for record, field in (
        ({"title": "no id"}, "id"),
        ({"id": "a", "text": "t", "x402": []}, "x402"),
        ({"id": "a", "text": "t", "fields": "tags"}, "fields"),
        ({"id": "a", "title": "no text"}, "text"),
    ):
        with pytest.raises(ValueError, match=f"^{field}: ") as info:
            document_from_record(record)
        assert isinstance(info.value, RecordError) and info.value.field == field


def test_osa_counts_a_transposition_as_one_edit() -> None:
    from pytest_searcheval.engine.title import osa, sim

    assert osa("scrpae", "scrape") == 1
    assert osa("outlok", "outlook") == 1
    assert osa("kitten", "sitting") == 3
    assert sim("outlok", "outlook") == pytest.approx(1 - 1 / 7)
    assert sim("chat", "char") == pytest.approx(0.75)
    assert sim("hub", "hug") == 0.0  # short tokens must match exactly
    assert sim("search", "archive") == 0.0


def test_title_match_prefers_the_whole_name_and_penalises_repeats() -> None:
    from pytest_searcheval.engine.title import TitleIndex, boost

    idx = TitleIndex()
    idx.add("search", "Headline Hub Search")
    idx.add("archive", "Headline Hub Archive")
    idx.add("stuffed", "Headline Hub Search Headline Hub Search Headline Hub Search")
    idx.add("chat", "Cortex Chat")
    idx.add("long", "Cortex Chat Long Context")
    m = idx.match("Headline Hub Search")
    assert m["search"] == pytest.approx(1.0)
    assert m["archive"] == pytest.approx(2 / 3)
    assert m["stuffed"] == pytest.approx(1 / 3)  # 3 distinct of 9 tokens
    m = idx.match("Cortex Chat by Cortex Relay")
    assert m["chat"] == pytest.approx(1.0) and m["long"] == pytest.approx(0.5)
    assert idx.match("headlne hub serch")["search"] > idx.match("headlne hub serch")["archive"]
    assert boost(0.5, 0.5) == 0.0 and boost(1.0, 0.5) == 1.0
    assert boost(0.75, 0.5) == pytest.approx(0.5)
    idx.remove("search")
    assert "search" not in idx.match("Headline Hub Search")
    clone = idx.copy()
    clone.add("search", "Headline Hub Search")
    assert "search" not in idx.match("Headline Hub Search")


def test_stuffing_penalty_spares_prose_and_hits_repeated_terms() -> None:
    from pytest_searcheval.engine.dedup import DedupParams, stuffing_penalty

    p = DedupParams()
    prose = "Daily weather forecast for any city: temperature, rain, wind and humidity."
    assert stuffing_penalty("Skyline Daily Forecast", prose, p) == 0.0
    stuffed = " ".join(["skyline daily forecast"] * 15) + " " + prose
    assert stuffing_penalty("Skyline Daily Forecast", stuffed, p) == 1.0
    # u = 0.55 (11 distinct of 20): halfway between u_lo = 0.4 and u_hi = 0.7
    half = " ".join([f"w{i}" for i in range(10)] + ["rain"] * 10)
    assert stuffing_penalty("x", half, p) == pytest.approx((0.7 - 11 / 20) / 0.3)


def test_near_duplicates_collapse_to_the_name_owner() -> None:
    import numpy as np

    from pytest_searcheval.engine.dedup import (
        DedupParams,
        DuplicateGroups,
        establishment,
        owns_name,
    )

    e1 = np.array([1.0, 0.0, 0.0])
    e_close = np.array([0.95, np.sqrt(1 - 0.95**2), 0.0])  # cos 0.95
    e_far = np.array([0.6, 0.8, 0.0])  # cos 0.6
    vecs = {"orig": e1, "mirror": e_close, "sibling": e_close, "other": e_far}
    titles = {
        "orig": "Coinpulse Spot",
        "mirror": "Coinpulse Spot Mirror",  # Jaccard 2/3 with orig
        "sibling": "Coinpulse History",  # Jaccard 1/3: not linked despite cos 0.95
        "other": "Coinpulse Spot",  # same title but cos 0.6: not linked
    }
    groups = DuplicateGroups()
    groups.update(list(titles), titles, lambda ids: {i: vecs[i] for i in ids}, DedupParams())
    assert groups.links["orig"] == {"mirror"} and not groups.links["sibling"]
    owner = {
        "orig": owns_name("Coinpulse Spot", "https://api.coinpulse.example/v1/spot", None),
        "mirror": owns_name("Coinpulse Spot Mirror", "https://api.cachepoint.example/x", None),
    }
    assert owner == {"orig": 1, "mirror": 0}
    settlements = {"orig": 10, "mirror": 5000}  # the mirror sells more, the original owns the name
    groups.assign(
        lambda d: establishment({"settlements": settlements.get(d, 0)}, 0, d, owner.get(d, 0))
    )
    assert groups.rep["mirror"] == "orig"
    ranked = [("mirror", 0.9), ("other", 0.5), ("orig", 0.4), ("sibling", 0.3)]
    assert groups.collapse(ranked) == [("orig", 0.9), ("other", 0.5), ("sibling", 0.3)]


def test_title_match_among_candidates_equals_the_index_lookup() -> None:
    from pytest_searcheval.engine.title import TitleIndex

    idx = TitleIndex()
    titles = {
        "a": "Headline Hub Search",
        "b": "Headline Hub Archive",
        "c": "Nimbus Outlook",
        "d": "Outlook Nimbus Outlook",
        "e": "Unrelated Thing",
    }
    for doc_id, title in titles.items():
        idx.add(doc_id, title)
    for query in ("headline hub serch", "nimbus outlok", "hub"):
        full = idx.match(query)
        among = idx.match_among(query, ["a", "c", "d", "e"])
        assert among == pytest.approx({d: v for d, v in full.items() if d != "b"}), query


def test_bounded_osa_agrees_with_the_full_distance() -> None:
    import random

    from pytest_searcheval.engine.title import osa

    rng = random.Random(7)
    for _ in range(3000):
        a = "".join(rng.choice("abc") for _ in range(rng.randint(0, 7)))
        b = "".join(rng.choice("abc") for _ in range(rng.randint(0, 7)))
        d = osa(a, b)
        for k in range(4):
            r = osa(a, b, k)
            assert r == d if d <= k else r > k, (a, b, k)


class _FixedScorer:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [self.scores[t] for t in texts]


def test_rerank_head_reorders_the_head_and_keeps_the_tail_below_it() -> None:
    from pytest_searcheval.engine.rerank import rerank_head

    ranked = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    passages = {"a": "ta", "b": "tb", "c": "tc"}
    scorer = _FixedScorer({"ta": -2.0, "tb": 5.0, "tc": 5.0})
    out, head = rerank_head(scorer, "q", ranked, passages, depth=3)
    assert [d for d, _ in out] == ["b", "c", "a", "d"]  # ties by id, tail last
    assert head == {"b": 5.0, "c": 5.0, "a": -2.0}
    assert out[3][1] < min(head.values())


def test_rerank_head_mix_weighs_the_model_order_against_the_hybrid_order() -> None:
    from pytest_searcheval.engine.rerank import MIX_K, rerank_head

    ranked = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    passages = {"a": "ta", "b": "tb", "c": "tc"}
    # the model reverses the head: c, b, a
    scorer = _FixedScorer({"ta": 0.1, "tb": 0.2, "tc": 0.3})
    model_only, head = rerank_head(scorer, "q", ranked, passages, depth=3, mix=1.0)
    assert [d for d, _ in model_only] == ["c", "b", "a", "d"]
    hybrid_only, _ = rerank_head(scorer, "q", ranked, passages, depth=3, mix=0.0)
    assert [d for d, _ in hybrid_only] == ["a", "b", "c", "d"]
    half, head_half = rerank_head(scorer, "q", ranked, passages, depth=3, mix=0.5)
    # a: 1/(K+3) + 1/(K+1), c: 1/(K+1) + 1/(K+3): a tie, broken by id; b in the middle both ways
    assert [d for d, _ in half] == ["a", "c", "b", "d"]
    assert half[0][1] == pytest.approx(0.5 / (MIX_K + 3) + 0.5 / (MIX_K + 1))
    # the head's model scores stay the model's (they are the no-result evidence)
    assert head_half == head == {"c": 0.3, "b": 0.2, "a": 0.1}
    assert half[3][1] < half[2][1]  # the tail stays below the head


def test_decision_cuts_only_when_asked_and_always_on_an_empty_ranking() -> None:
    from pytest_searcheval.engine import decision

    rule = NoResultRule(w_cos=1.0, w_cov=0.0, tau=0.5)
    low = decision.Features(cos=0.1, coverage=0.0, rerank=None)
    assert decision.decide(low, rule, apply_threshold=True, empty=False).no_result
    uncut = decision.decide(low, rule, apply_threshold=False, empty=False)
    assert not uncut.no_result and uncut.as_dict()["threshold"] == 0.5
    high = decision.Features(cos=0.9, coverage=0.0, rerank=None)
    assert not decision.decide(high, rule, apply_threshold=True, empty=False).no_result
    assert decision.decide(high, None, apply_threshold=True, empty=True).no_result
    assert decision.decide(high, None, apply_threshold=True, empty=False).as_dict()["value"] is None


@pytest.mark.parametrize(
    ("features", "empty", "candidates", "filtered", "reason"),
    [
        ((0.1, 0.0), False, 12, False, "below-threshold"),
        ((0.9, 0.5), True, 0, False, "no-candidates"),
        ((0.9, 0.5), True, 0, True, "no-candidates"),
        ((0.9, 0.5), True, 7, True, "filtered-out"),
        ((0.9, 0.5), True, 3, False, "removed"),
    ],
)
def test_an_empty_answer_says_why(
    features: tuple[float, float], empty: bool, candidates: int, filtered: bool, reason: str
) -> None:
    from pytest_searcheval.engine import decision

    rule = NoResultRule(w_cos=1.0, w_cov=0.25, tau=0.5)
    found = decision.Features(cos=features[0], coverage=features[1], rerank=None)
    made = decision.decide(
        found, rule, apply_threshold=True, empty=empty, candidates=candidates, filtered=filtered
    )
    assert made.no_result and made.why is not None
    assert made.why["reason"] == reason
    assert made.why["evidence"] == {
        "cos": features[0],
        "coverage": features[1],
        "rerank": None,
        "candidates": candidates,
    }
    if reason == "below-threshold":
        assert made.why["rule"] == "1 * cos + 0.25 * coverage < 0.5"
        assert "0.100 is under the no-result threshold 0.5" in made.why["message"]
    else:
        assert made.why["rule"] is None
    answered = decision.decide(
        decision.Features(cos=0.9, coverage=0.5, rerank=None),
        rule,
        apply_threshold=True,
        empty=False,
        candidates=5,
    )
    assert answered.why is None
