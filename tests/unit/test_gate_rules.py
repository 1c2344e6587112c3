"""Each gate rule of ``RULES`` on its own: one test per rule function, called directly."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import gate_data
import pytest
from gate_data import CFG, OK, report

from pytest_searcheval.baseline import gate
from pytest_searcheval.baseline.gate import (
    RULES,
    GateContext,
    Rule,
    conventions,
    evaluate,
    gate_rule,
    make_baseline,
    remove_gate_rule,
)
from pytest_searcheval.settings import SearchEvalConfig


def _report(ndcg: float = 0.7, recall: float = 0.8, nra: float = 0.9) -> dict[str, Any]:
    return report(ndcg=ndcg, recall=recall, nra=nra)


BASE = make_baseline(_report(), CFG, "v1")


def _ctx(
    report: dict[str, Any] | None = None,
    baseline: Any = BASE,
    cfg: SearchEvalConfig = CFG,
    integrity: Rule = OK,
    baseline_error: str | None = None,
) -> GateContext:
    return GateContext(report or _report(), baseline, cfg, integrity, baseline_error)


def _one(rules: list[Rule]) -> Rule:
    (rule,) = rules
    return rule


def test_every_rule_has_its_own_test() -> None:
    tests = {name for name in globals() if name.startswith("test_")}
    untested = [
        r.__name__ for r in RULES if not any(t.startswith(f"test_{r.__name__}") for t in tests)
    ]
    assert untested == []
    assert [r for rule in RULES for r in rule(_ctx())] == evaluate(
        _report(), BASE, CFG, integrity=OK
    )


def test_rule_gated_available() -> None:
    assert _one(gate.rule_gated_available(_ctx())).status == "passed"
    report = _report()
    report["profiles"]["hybrid"] = {"available": False, "reason": "connection refused"}
    rule = _one(gate.rule_gated_available(_ctx(report)))
    assert rule.status == "failed" and rule.detail == "hybrid: connection refused"


def test_rule_search_errors_counts_and_names_errored_queries_within_the_tolerance() -> None:
    rule = _one(gate.rule_search_errors(_ctx()))
    assert (rule.name, rule.status) == ("no search errors", "passed")
    report = _report()
    error = {"error": "HTTP 503", "url": "http://s/search?q=x", "attempts": 2}
    report["queries"]["q1"]["errors"] = {"hybrid": error}
    report["queries"]["q2"] = {"profiles": {}, "errors": {"hybrid": error, "lexical": error}}
    rule = _one(gate.rule_search_errors(_ctx(report)))
    assert rule.status == "failed"
    assert rule.detail == (
        "errored queries: hybrid 2 (q1, q2); lexical 1 (q2) (tolerance 0 per profile)"
    )
    lenient = dataclasses.replace(CFG, max_errors=2)
    assert _one(gate.rule_search_errors(_ctx(report, cfg=lenient))).status == "passed"
    assert _one(gate.rule_search_errors(_ctx(report, cfg=lenient))).detail.startswith("errored")
    # The gate as a whole fails on it.
    assert not gate.passed(evaluate(report, BASE, CFG, integrity=OK))


def test_rule_baseline_readable() -> None:
    assert gate.rule_baseline_readable(_ctx()) == []
    rule = _one(gate.rule_baseline_readable(_ctx(baseline_error="b.json: not an object")))
    assert rule.status == "failed" and rule.detail == "b.json: not an object"


def test_rule_conventions() -> None:
    assert gate.rule_conventions(_ctx(baseline=None)) == []
    assert _one(gate.rule_conventions(_ctx())).status == "passed"
    report = _report()
    report["run"]["conventions"] = dict(conventions(CFG), limit=10)
    rule = _one(gate.rule_conventions(_ctx(report)))
    assert rule.status == "failed" and "limit 20 in the baseline, 10 now" in rule.detail


def test_rule_measures_vs_baseline() -> None:
    rules = gate.rule_measures_vs_baseline(_ctx(_report(ndcg=0.69, recall=0.7)))
    assert [(r.name, r.status) for r in rules] == [
        ("hybrid nDCG@10 vs baseline", "passed"),
        ("hybrid R@20 vs baseline", "failed"),
    ]
    assert "floor 0.7800" in rules[1].detail
    assert {r.detail for r in gate.rule_measures_vs_baseline(_ctx(baseline=None))} == {
        "no baseline"
    }
    partial = _report()
    partial["run"]["complete"] = False
    assert {r.status for r in gate.rule_measures_vs_baseline(_ctx(partial))} == {"skipped"}


def test_rule_gate_over() -> None:
    rules = gate.rule_gate_over(_ctx())
    assert [(r.name, r.status) for r in rules] == [
        ("hybrid >= lexical on nDCG@10", "passed"),
        ("hybrid >= lexical on R@20", "passed"),
    ]
    worse = _report(ndcg=0.4)
    assert gate.rule_gate_over(_ctx(worse))[0].status == "failed"
    assert gate.rule_gate_over(_ctx(cfg=dataclasses.replace(CFG, gate_over=None))) == []


def test_rule_gate_over_compares_the_queries_both_profiles_answered() -> None:
    # hybrid 0.7 on q1-q3 and errored on q4; lexical 0.8 on q1-q3 and 0.2 on q4: each
    # profile's mean alone (0.7 vs 0.65) would pass, though hybrid is worse on the same queries.
    report = _report(ndcg=0.7, recall=0.7)
    report["profiles"]["lexical"] = gate_data.profile(0.65, 0.65)
    report["queries"] = {
        q: {
            "profiles": {
                "lexical": {"measures": {"nDCG@10": v, "R@20": v}, "ids": ["a"]},
                **({} if q == "q4" else {"hybrid": {"measures": {"nDCG@10": 0.7, "R@20": 0.7}}}),
            },
            **({"errors": {"hybrid": {"error": "HTTP 503"}}} if q == "q4" else {}),
        }
        for q, v in (("q1", 0.8), ("q2", 0.8), ("q3", 0.8), ("q4", 0.2))
    }
    rule = gate.rule_gate_over(_ctx(report, None))[0]
    assert (rule.status, rule.detail) == (
        "failed",
        "now 0.7000 vs 0.8000 on the 3 queries both answered (errored on hybrid 1 (q4), "
        "left out; over every query each answered 0.7000 vs 0.6500)",
    )
    for q in report["queries"].values():
        q["profiles"].pop("hybrid", None)
    rule = gate.rule_gate_over(_ctx(report, None))[0]
    assert (rule.status, rule.detail) == (
        "skipped",
        "no query scored on both profiles (errored on hybrid 1 (q4))",
    )


def test_rule_hard_filters() -> None:
    assert _one(gate.rule_hard_filters(_ctx())).status == "passed"
    report = _report()
    report["profiles"]["lexical"]["hard_filter_violations"] = 3
    rule = _one(gate.rule_hard_filters(_ctx(report)))
    assert rule.status == "failed" and rule.detail.endswith(": lexical 3")


def test_rule_conformance_selects_the_filter_conformance_family_not_a_substring() -> None:
    report = _report()
    report["invariants"] = {
        "filter-conformance-c1": {"invariant": "filter-conformance", "status": "passed"},
        # Another family whose name merely contains "conformance": not the rule's business.
        "schema-conformance-q1": {"invariant": "schema-conformance", "status": "failed"},
    }
    rule = _one(gate.rule_conformance(_ctx(report)))
    assert (rule.status, rule.detail) == ("passed", "1/1 cases")
    report["invariants"]["filter-conformance-c1"]["status"] = "failed"
    rule = _one(gate.rule_conformance(_ctx(report)))
    assert rule.status == "failed" and rule.detail == "0/1 cases; failing: filter-conformance-c1"
    # A record without its family (hand-built, older) is placed by its id's prefix.
    assert gate.family("filter-conformance-c9", {}) == "filter-conformance"
    assert gate.rule_conformance(_ctx(_report())) == []


def test_rule_conformance_does_not_pass_cases_whose_search_errored() -> None:
    report = _report()
    errored = {"invariant": "filter-conformance", "status": "errored", "passed": False}
    report["invariants"] = {f"filter-conformance-c{i}": dict(errored) for i in range(3)}
    rule = _one(gate.rule_conformance(_ctx(report)))
    assert (rule.status, rule.detail) == (
        "skipped",
        "no case judged: 3 not judged (search errors: filter-conformance-c0, "
        "filter-conformance-c1, filter-conformance-c2)",
    )
    report["invariants"]["filter-conformance-c0"] = {
        "invariant": "filter-conformance",
        "status": "passed",
        "passed": True,
    }
    rule = _one(gate.rule_conformance(_ctx(report)))
    assert (rule.status, rule.detail) == (
        "passed",
        "1/1 cases, 2 not judged (search errors: filter-conformance-c1, filter-conformance-c2)",
    )


def test_rule_no_result_accuracy() -> None:
    assert _one(gate.rule_no_result_accuracy(_ctx())).status == "passed"
    rule = _one(gate.rule_no_result_accuracy(_ctx(_report(nra=0.5))))
    assert rule.status == "failed" and rule.detail == "0.5000 vs 0.9000"


def test_rule_no_result_accuracy_compares_the_unanswerable_queries_that_answered() -> None:
    # u4 errored now; the baseline answered it correctly (nothing): over every query its
    # accuracy is 0.75, over the three that answered now 2/3, as now.
    report = _report(nra=2 / 3)
    report["queries"] = {
        q: {"unanswerable": True, "profiles": {"hybrid": {"measures": {}, "ids": ids}}}
        for q, ids in (("u1", []), ("u2", []), ("u3", ["x"]))
    }
    report["queries"]["u4"] = {"unanswerable": True, "errors": {"hybrid": {"error": "HTTP 503"}}}
    base = copy.deepcopy(BASE)
    base["profiles"]["hybrid"]["no_result_accuracy"] = 0.75
    base["profiles"]["hybrid"]["queries"] = {
        "u1": {"ids": []},
        "u2": {"ids": []},
        "u3": {"ids": ["x"]},
        "u4": {"ids": []},
    }
    rule = _one(gate.rule_no_result_accuracy(_ctx(report, base)))
    assert (rule.status, rule.detail) == (
        "passed",
        "0.6667 vs 0.6667 on the queries that answered: 1 unanswerable errored, not scored "
        "(u4), baseline over every unanswerable query 0.7500",
    )
    base["profiles"]["hybrid"]["queries"] = {}
    rule = _one(gate.rule_no_result_accuracy(_ctx(report, base)))
    assert (rule.status, rule.detail) == (
        "skipped",
        "cannot compare on the same queries: 1 unanswerable errored, not scored (u4), and the "
        "baseline records no results of u1, u2, u3 (now 0.6667, baseline over every query "
        "0.7500)",
    )


def test_rule_invariants() -> None:
    assert gate.rule_invariants(_ctx()) == []
    base = copy.deepcopy(BASE)
    base["invariants"] = {"known-item-q1": True}
    report = _report()
    report["invariants"] = {"known-item-q1": {"status": "failed"}}
    rule = _one(gate.rule_invariants(_ctx(report, base)))
    assert rule.status == "failed" and "newly failing: known-item-q1" in rule.detail
    assert _one(gate.rule_invariants(_ctx(report, None))).status == "skipped"


def test_rule_dataset_and_model() -> None:
    assert _one(gate.rule_dataset_and_model(_ctx())).detail == "hashes match"
    report = _report()
    report["collection"]["hashes"]["queries"] = "sha256:z"
    rule = _one(gate.rule_dataset_and_model(_ctx(report)))
    assert rule.status == "failed" and "queries sha256:b -> sha256:z" in rule.detail


def test_rule_latency() -> None:
    assert _one(gate.rule_latency(_ctx())).detail == "no budget set"
    report = _report()
    report["latency_tests"] = {"hybrid": {"profile": "hybrid", "p95_ms": 80.0, "p99_ms": 90.0}}
    cfg = dataclasses.replace(CFG, latency_p95_ms=50.0)
    rule = _one(gate.rule_latency(_ctx(report, cfg=cfg)))
    assert rule.status == "failed" and "hybrid p95 80.00 ms (budget 50)" in rule.detail


def test_rule_latency_judges_each_profile_by_its_own_budget() -> None:
    report = _report()
    report["latency_tests"] = {
        "hybrid": {"profile": "hybrid", "p95_ms": 40.0, "p99_ms": 90.0},
        "hybrid_rerank": {"profile": "hybrid_rerank", "p95_ms": 120.0, "p99_ms": 99.0},
    }
    cfg = dataclasses.replace(
        CFG, latency_p95_ms=50.0, latency_p99_ms=100.0, latency_budgets=("hybrid_rerank=250",)
    )
    rule = _one(gate.rule_latency(_ctx(report, cfg=cfg)))
    assert rule.status == "passed", rule.detail
    assert "hybrid_rerank p95 120.00 ms (budget 250)" in rule.detail
    # no p99 in the entry: the general p99 budget still holds for the profile
    report["latency_tests"]["hybrid_rerank"]["p99_ms"] = 130.0
    rule = _one(gate.rule_latency(_ctx(report, cfg=cfg)))
    assert rule.status == "failed" and "hybrid_rerank p99 130.00 ms (budget 100)" in rule.detail
    report["latency_tests"]["hybrid_rerank"]["p99_ms"] = 99.0
    report["latency_tests"]["hybrid_rerank"]["p95_ms"] = 251.0
    rule = _one(gate.rule_latency(_ctx(report, cfg=cfg)))
    assert rule.status == "failed" and "hybrid_rerank p95 251.00 ms (budget 250)" in rule.detail
    # a per-profile budget alone enables the rule
    alone = dataclasses.replace(CFG, latency_budgets=("hybrid_rerank=250/400",))
    rule = _one(gate.rule_latency(_ctx(report, cfg=alone)))
    assert rule.status == "failed" and rule.detail == (
        "hybrid p95 40.00 ms (no budget); "
        "hybrid_rerank p95 251.00 ms (budget 250); hybrid_rerank p99 99.00 ms (budget 400)"
    )
    # budgets that leave every timed profile without one judge nothing: skipped, not passed
    none = dataclasses.replace(CFG, latency_budgets=("hybrid=-/-",))
    rule = _one(gate.rule_latency(_ctx(report, cfg=none)))
    assert rule.status == "skipped"
    assert rule.detail.startswith("no budget applies to the timed profiles: hybrid p95 40.00 ms")


def test_rule_embedding_fallback_judges_the_targets_counts() -> None:
    rule = _one(gate.rule_embedding_fallback(_ctx()))
    assert rule == Rule(
        "no embedding fallback", "skipped", "not measured: the target reports no embedding counts"
    )
    report = _report()
    counts = {"listings": 9, "embedded": 9, "failed": 0, "fallback": 0, "reasons": {}}
    report["quality"] = {"embeddings": counts, "not_measured": {}}
    assert _one(gate.rule_embedding_fallback(_ctx(report))) == Rule(
        "no embedding fallback",
        "passed",
        "9 of 9 listings embedded, 0 failed, 0 served without their embedding; tolerance 0",
    )
    # a fallback alone fails it (a listing served without its vector, none failed)
    report["quality"]["embeddings"] = dict(counts, embedded=8, fallback=1)
    assert _one(gate.rule_embedding_fallback(_ctx(report))).status == "failed"
    report["quality"]["embeddings"] = dict(
        counts, embedded=8, failed=1, fallback=1, reasons={"RuntimeError": 1}
    )
    rule = _one(gate.rule_embedding_fallback(_ctx(report)))
    assert rule.status == "failed" and "1 failed (RuntimeError 1)" in rule.detail
    tolerant = dataclasses.replace(CFG, embedding_fallback_tolerance=1)
    assert _one(gate.rule_embedding_fallback(_ctx(report, cfg=tolerant))).status == "passed"
    report["quality"]["embeddings"] = dict(counts, failed=True)
    rule = _one(gate.rule_embedding_fallback(_ctx(report)))
    assert rule.status == "failed" and rule.detail.startswith("embeddings.failed is True")
    report["quality"]["embeddings"] = {"listings": 9}
    assert _one(gate.rule_embedding_fallback(_ctx(report))).status == "skipped"


def test_rule_hand_written_judges_only_gated_tests() -> None:
    assert gate.rule_hand_written(_ctx()) == []
    report = _report()
    report["hand_written"] = {"tests": {}, "counts": {}, "gated": {"tests": 0, "not_passed": []}}
    assert gate.rule_hand_written(_ctx(report)) == []
    report["hand_written"]["gated"] = {"tests": 2, "not_passed": []}
    assert _one(gate.rule_hand_written(_ctx(report))) == Rule(
        "hand-written gated tests pass", "passed", "2 passed"
    )
    report["hand_written"]["gated"] = {"tests": 2, "not_passed": ["t.py::test_a"]}
    rule = _one(gate.rule_hand_written(_ctx(report)))
    assert rule.status == "failed" and rule.detail == "1 of 2 did not pass: t.py::test_a"


def test_rule_integrity() -> None:
    unverified = Rule("baseline matches its git tag", "unverified", "no tag")
    assert _one(gate.rule_integrity(_ctx(integrity=unverified))) == unverified
    strict = dataclasses.replace(CFG, strict_baseline=True)
    rule = _one(gate.rule_integrity(_ctx(integrity=unverified, cfg=strict)))
    assert rule.status == "failed" and rule.detail == "no tag (strict)"


@pytest.fixture
def registered() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        remove_gate_rule(name)


def test_a_project_rule_is_judged_after_the_built_in_ones(registered: list[str]) -> None:
    @gate_rule("top result titled")
    def titled(ctx: GateContext) -> Rule:
        return Rule("top result titled", "failed", f"{ctx.gated}: 1 untitled")

    registered.append("top result titled")
    rules = evaluate(_report(), BASE, CFG, integrity=OK)
    assert rules[-1] == Rule("top result titled", "failed", "hybrid: 1 untitled")
    assert not gate.passed(rules)


def test_a_project_rule_that_raises_or_returns_nonsense_fails_with_why(
    registered: list[str],
) -> None:
    @gate_rule("broken")
    def broken(ctx: GateContext) -> Rule:
        raise KeyError("latency_ms")

    @gate_rule("confused")
    def confused(ctx: GateContext) -> Any:
        return "passed"

    @gate_rule("silent")
    def silent(ctx: GateContext) -> None:
        return None

    registered.extend(["broken", "confused", "silent"])
    by_name = {r.name: r for r in evaluate(_report(), BASE, CFG, integrity=OK)}
    assert by_name["broken"].status == "failed" and "raised KeyError" in by_name["broken"].detail
    assert by_name["confused"].status == "failed" and "not a Rule" in by_name["confused"].detail
    assert "silent" not in by_name


def test_rule_rerank_lift_reads_the_reports_lift_with_its_tolerance() -> None:
    report = _report()
    report["quality"] = {"not_measured": {"reranker_lift": "no reranked profile answered"}}
    assert _one(gate.rule_rerank_lift(_ctx(report))) == Rule(
        "reranking matches or improves hybrid",
        "skipped",
        "not measured: no reranked profile answered",
    )
    lift = {"profile": "hybrid_rerank", "over": "hybrid", "nDCG@10": 0.012, "n": 50}
    report["quality"] = {"reranker_lift": lift, "not_measured": {}}
    assert _one(gate.rule_rerank_lift(_ctx(report))) == Rule(
        "reranking matches or improves hybrid",
        "passed",
        f"hybrid_rerank - hybrid nDCG@10 +0.0120 over 50 queries; tolerance {CFG.tolerance:g}",
    )
    # by default within the baseline comparisons' tolerance; its own setting overrides it
    report["quality"]["reranker_lift"] = {**lift, "nDCG@10": -CFG.tolerance / 2}
    assert _one(gate.rule_rerank_lift(_ctx(report))).status == "passed"
    report["quality"]["reranker_lift"] = {**lift, "nDCG@10": -CFG.tolerance - 0.001}
    assert _one(gate.rule_rerank_lift(_ctx(report))).status == "failed"
    strict = dataclasses.replace(CFG, rerank_tolerance=0.0)
    report["quality"]["reranker_lift"] = {**lift, "nDCG@10": -0.0001}
    assert _one(gate.rule_rerank_lift(_ctx(report, cfg=strict))).status == "failed"
    tolerant = dataclasses.replace(CFG, rerank_tolerance=0.05)
    report["quality"]["reranker_lift"] = {**lift, "nDCG@10": -0.04}
    assert _one(gate.rule_rerank_lift(_ctx(report, cfg=tolerant))).status == "passed"
