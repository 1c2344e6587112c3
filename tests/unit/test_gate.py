"""Gate rules on hand-built reports: each rule can pass, fail or be skipped with its numbers."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from gate_data import CFG, HASHES, OK, report

from pytest_searcheval.baseline.gate import (
    Rule,
    conventions,
    evaluate,
    make_baseline,
    passed,
    verify_baseline,
)
from pytest_searcheval.settings import SearchEvalConfig

_report = report


def _rules(report: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, Rule]:
    return {r.name: r for r in evaluate(report, baseline, CFG, integrity=OK)}


BASE = make_baseline(_report(ndcg=0.7, recall=0.8, nra=0.9), CFG, "v1")


def test_unchanged_run_passes_every_rule() -> None:
    rules = _rules(_report(ndcg=0.7, recall=0.8, nra=0.9), BASE)
    assert passed(list(rules.values()))
    assert rules["hybrid nDCG@10 vs baseline"].detail.startswith("0.7000 vs baseline 0.7000")


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"ndcg": 0.67}, "hybrid nDCG@10 vs baseline"),
        ({"recall": 0.77}, "hybrid R@20 vs baseline"),
        ({"nra": 0.85}, "hybrid no-result accuracy vs baseline"),
        ({"violations": 1}, "hard filters respected"),
        ({"ndcg": 0.45}, "hybrid >= lexical on nDCG@10"),
    ],
)
def test_each_rule_fails_on_its_own_regression(change: dict[str, Any], rule: str) -> None:
    kwargs = {"ndcg": 0.7, "recall": 0.8, "nra": 0.9} | change
    rules = _rules(_report(**kwargs), BASE)
    assert rules[rule].status == "failed", rules[rule]
    assert not passed(list(rules.values()))


def test_drop_within_tolerance_passes() -> None:
    rules = _rules(_report(ndcg=0.681, recall=0.8, nra=0.9), BASE)
    assert rules["hybrid nDCG@10 vs baseline"].status == "passed"


def test_hybrid_below_lexical_in_the_baseline_fails() -> None:
    base = copy.deepcopy(BASE)
    base["profiles"]["hybrid"]["aggregates"]["R@20"] = 0.5
    rules = _rules(_report(ndcg=0.7, recall=0.8, nra=0.9), base)
    assert rules["hybrid >= lexical on R@20"].status == "failed"
    assert "baseline 0.5000 vs 0.6000" in rules["hybrid >= lexical on R@20"].detail


def test_model_or_data_change_needs_a_rebaseline() -> None:
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    report["model"]["revision"] = "r2"
    report["collection"]["hashes"]["corpus"] = "sha256:z"
    rule = _rules(report, BASE)["dataset and model unchanged"]
    assert rule.status == "failed"
    assert "corpus sha256:a -> sha256:z" in rule.detail and "model revision r1 -> r2" in rule.detail


def test_no_baseline_and_partial_runs_skip_comparisons_not_hard_filters() -> None:
    rules = _rules(_report(ndcg=0.7, recall=0.8, violations=2), None)
    assert rules["hybrid nDCG@10 vs baseline"].status == "skipped"
    assert rules["hard filters respected"].status == "failed"
    partial = _report(ndcg=0.1, recall=0.1)
    partial["run"]["complete"] = False
    rules = _rules(partial, BASE)
    assert rules["hybrid nDCG@10 vs baseline"].detail.startswith("partial run")
    assert passed(list(rules.values()))


def test_invariants_and_conformance_rules() -> None:
    base = copy.deepcopy(BASE)
    base["invariants"] = {"known-item-q1": True, "churn-g2": False}
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    report["invariants"] = {
        "known-item-q1": {"passed": True},
        "churn-g2": {"passed": False},
        "filter-conformance-c3": {"passed": True},
    }
    rules = _rules(report, base)
    assert rules["invariants not below baseline"].status == "passed"  # churn-g2 failed before
    assert rules["filter conformance"].detail == "1/1 cases"
    report["invariants"]["known-item-q1"]["passed"] = False
    report["invariants"]["filter-conformance-c3"]["passed"] = False
    rules = _rules(report, base)
    assert rules["invariants not below baseline"].status == "failed"
    assert "known-item-q1" in rules["invariants not below baseline"].detail
    assert rules["filter conformance"].status == "failed"


def test_unverified_baseline_fails_only_when_strict() -> None:
    unverified = Rule("baseline matches its git tag", "unverified", "no tag")
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    assert passed(evaluate(report, BASE, CFG, integrity=unverified))
    strict = SearchEvalConfig(**{**CFG.__dict__, "strict_baseline": True})
    assert not passed(evaluate(report, BASE, strict, integrity=unverified))


def test_verify_baseline_without_tag_or_git(tmp_path: Any) -> None:
    path = tmp_path / "baseline.json"
    assert verify_baseline(path, None).status == "skipped"
    assert verify_baseline(path, {"tag": None}).status == "unverified"
    path.write_text("{}")
    rule = verify_baseline(path, {"tag": "v1"})
    assert rule.status == "unverified" and "not in a git repository" in rule.detail


def test_baseline_holds_per_query_values_and_rankings() -> None:
    assert BASE["tag"] == "v1"
    assert BASE["profiles"]["hybrid"]["queries"]["q1"] == {"nDCG@10": 0.7, "ids": ["a", "b"]}
    assert BASE["profiles"]["hybrid"]["aggregates"] == {"nDCG@10": 0.7, "R@20": 0.8}
    assert BASE["collection"]["hashes"] == HASHES


def test_conventions_that_differ_from_the_baseline_fail_naming_each() -> None:
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    report["run"]["conventions"] = dict(conventions(CFG), split="dev", limit=10)
    rule = _rules(report, BASE)["conventions match the baseline"]
    assert rule.status == "failed"
    assert "split 'test' in the baseline, 'dev' now" in rule.detail
    assert "limit 20 in the baseline, 10 now" in rule.detail


def test_a_run_gating_another_profile_than_the_baselines_fails_the_conventions() -> None:
    assert BASE["run"]["gated_profile"] == CFG.gated == "hybrid"
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    report["run"]["gated_profile"] = "lexical"
    rules = _rules(report, BASE)
    rule = rules["conventions match the baseline"]
    assert rule.status == "failed"
    assert (
        "gated profile 'hybrid' in the baseline" in rule.detail and "'lexical' now" in rule.detail
    )
    assert not passed(list(rules.values()))
    same = _rules(_report(ndcg=0.7, recall=0.8, nra=0.9), BASE)["conventions match the baseline"]
    assert same.status == "passed" and "gated profile 'hybrid'" in same.detail


def test_invariants_are_not_compared_with_another_gated_profiles_outcomes() -> None:
    base = make_baseline(_with_invariant(passed=True), CFG, "v1")
    now = _with_invariant(passed=False)
    assert _rules(now, base)["invariants not below baseline"].status == "failed"
    now["run"]["gated_profile"] = "lexical"
    rule = _rules(now, base)["invariants not below baseline"]
    assert rule.status == "skipped" and "recorded on the gated profile 'hybrid'" in rule.detail
    assert "this run gates 'lexical'" in rule.detail


def _with_invariant(*, passed: bool) -> dict[str, Any]:
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    report["invariants"] = {"known-item-stability-q1": {"passed": passed}}
    return report


def test_a_baseline_that_does_not_record_its_gated_profile_is_compared_as_before() -> None:
    import copy

    older = copy.deepcopy(BASE)
    del older["run"]["gated_profile"]
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    report["run"]["gated_profile"] = "lexical"
    rule = _rules(report, older)["conventions match the baseline"]
    assert rule.status == "passed" and "does not record its gated profile" in rule.detail


def test_the_oracle_rule_says_when_no_query_applied_a_hard_filter() -> None:
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    rule = _rules(report, BASE)["hard filters respected"]
    assert rule.status == "passed"
    assert "no query applied a hard filter: checked only that each is a corpus document" in (
        rule.detail
    )
    report["queries"]["q1"]["profiles"]["hybrid"]["applied_filters"] = {"network": "x"}
    report["queries"]["q1"]["profiles"]["hybrid"]["ids"] = []  # applied, nothing returned
    rule = _rules(report, BASE)["hard filters respected"]
    assert rule.status == "passed" and "no query applied" not in rule.detail
    trec = _report(ndcg=0.7, recall=0.8, nra=0.9)
    trec["collection"]["documents"] = 0  # TREC qrels and topics without a corpus
    rule = _rules(trec, BASE)["hard filters respected"]
    assert "no query applied a hard filter and there is no corpus: nothing checked" in rule.detail
    assert rule.status == "skipped"  # not applicable: no pass for what was never checked


def test_skipped_invariant_cases_are_not_written_into_the_baseline() -> None:
    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    report["invariants"] = {
        "known-item-stability-q1": {"passed": True},
        "deletion-isolation-q1": {"passed": False, "status": "skipped"},
    }
    assert make_baseline(report, CFG, "v1")["invariants"] == {"known-item-stability-q1": True}


def test_gate_over_profile_comes_from_the_settings() -> None:
    import dataclasses

    cfg = dataclasses.replace(CFG, gate_over=None)
    names = {r.name for r in evaluate(_report(ndcg=0.7, recall=0.8), BASE, cfg, integrity=OK)}
    assert not any(">=" in n for n in names)


def test_latency_budget_not_measured_fails_only_when_strict() -> None:
    import dataclasses

    report = _report(ndcg=0.7, recall=0.8, nra=0.9)
    cfg = dataclasses.replace(CFG, latency_p95_ms=50.0)
    rule = {r.name: r for r in evaluate(report, BASE, cfg, integrity=OK)}["latency budgets"]
    assert rule.status == "skipped" and rule.detail.startswith("not measured")
    strict = dataclasses.replace(cfg, strict_baseline=True)
    rule = {r.name: r for r in evaluate(report, BASE, strict, integrity=OK)}["latency budgets"]
    assert rule.status == "failed"


def test_suggested_tags_differ_for_every_changed_baseline_and_name_the_collection() -> None:
    from pytest_searcheval.baseline.gate import suggested_tag

    first = make_baseline(_report(ndcg=0.7, recall=0.8, nra=0.9), CFG, None)
    second = make_baseline(_report(ndcg=0.72, recall=0.8, nra=0.9), CFG, None)
    tag = suggested_tag(first)
    assert tag.startswith("searcheval-t-") and len(tag) == len("searcheval-t-") + 12
    # A second re-baseline that changed a number never reuses the first one's tag ...
    assert suggested_tag(second) != tag
    # ... an unchanged one names the same tag, whatever tag the file held before.
    assert suggested_tag({**first, "tag": "old"}) == tag
    odd = {**first, "collection": {**first["collection"], "name": "My set: v2/"}}
    assert suggested_tag(odd).startswith("searcheval-My-set-v2-")
