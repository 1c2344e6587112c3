"""The known-failure ledger: baseline-aware expectations for query tests and invariant cases."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import make_project, read_report

from pytest_searcheval.baseline.ledger import judge_failure, ledger_entry
from pytest_searcheval.reasons import Reason

pytest_plugins = ["pytester"]

ARGS = ("--search-eval", "-p", "no:cacheprovider", "-rxX")


def _rebaseline(pytester: pytest.Pytester, *extra: str) -> dict[str, object]:
    pytester.runpytest(*ARGS, "--search-eval-update-baseline", *extra)
    baseline: dict[str, object] = json.loads(
        (pytester.path / "baselines" / "baseline.json").read_text()
    )
    return baseline


def test_known_failure_xfails_and_a_fixed_one_xpasses(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")  # q3 (unanswerable) gets an answer
    baseline = _rebaseline(pytester)
    assert baseline["known_failures"] == {
        "queries": {
            "q3": {
                "reasons": ["unanswerable-answered"],
                "summary": "unanswerable query returned 1 results (expected none)",
            }
        },
        "invariants": {},
    }

    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=3, xfailed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["known failures (xfail, recorded in the baseline): 1 query tests, 0 invariant cases"]
    )
    result.stdout.fnmatch_lines(
        [
            "XFAIL collection.yaml::test_query[[]q3-no-result[]] - known failure recorded in the "
            "baseline: unanswerable query returned 1 results*"
        ]
    )
    report = read_report(pytester)
    assert report["queries"]["q3"]["failures"]  # still listed
    assert report["queries"]["q3"]["ledger"] == "known"
    assert report["known_failures"]["queries"] == {"known": ["q3"], "new": [], "fixed": []}
    assert "`q3` (known failure)" in (pytester.path / "searcheval-report" / "report.md").read_text()

    monkeypatch.setenv("SEARCHEVAL_FAKE", "")  # fixed
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=3, xpassed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["fixed since the baseline (XPASS): q3; re-baseline with --search-eval-update-baseline*"]
    )
    result.stdout.fnmatch_lines(
        ["XPASS collection.yaml::test_query[[]q3-no-result[]] - known failure recorded*"]
    )
    assert read_report(pytester)["known_failures"]["queries"]["fixed"] == ["q3"]


def test_new_failure_of_a_test_that_passed_in_the_baseline_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    baseline = _rebaseline(pytester)
    assert baseline["known_failures"] == {"queries": {}, "invariants": {}}
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=3, failed=2)  # and test_gate: the gate fails
    result.stdout.fnmatch_lines(["*regression: this test passed in the baseline"])
    report = read_report(pytester)
    assert report["queries"]["q3"]["ledger"] == "new"
    assert report["known_failures"]["queries"]["new"] == ["q3"]
    # The count-based gate rule still sees the drop.
    result.stdout.fnmatch_lines(["*[[]failed[]] hybrid no-result accuracy vs baseline: 0.0000*"])


def test_a_run_gating_another_profile_is_not_judged_by_the_baselines_outcomes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    baseline = _rebaseline(pytester)
    assert baseline["run"]["gated_profile"] == "hybrid"  # type: ignore[index]
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")
    result = pytester.runpytest(*ARGS, "--search-eval-gated-profile=lexical")
    result.assert_outcomes(passed=2, failed=3)  # q3, q1 on the fake's lexical ranking, test_gate
    result.stdout.fnmatch_lines(
        [
            "*not judged by the baseline's known failures: they were recorded on the gated "
            "profile 'hybrid', and this run gates 'lexical' (re-baseline to compare)"
        ]
    )
    result.stdout.no_fnmatch_line("*regression: this test passed in the baseline*")
    result.stdout.fnmatch_lines(
        ["*[[]failed[]] conventions match the baseline: gated profile 'hybrid' in the baseline*"]
    )
    assert result.ret == 1


def test_another_gated_profile_neither_xfails_nor_fixes_the_baselines_known_failures(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")  # q3 (unanswerable) gets an answer
    baseline = _rebaseline(pytester)
    assert set(baseline["known_failures"]["queries"]) == {"q3"}  # type: ignore[index]
    monkeypatch.setenv("SEARCHEVAL_FAKE", "")  # q3 passes now, on any profile
    result = pytester.runpytest(*ARGS, "--search-eval-gated-profile=lexical")
    outcomes = result.parseoutcomes()
    assert "xpassed" not in outcomes and "xfailed" not in outcomes, outcomes
    report = read_report(pytester)
    assert report["queries"]["q3"]["ledger"] is None
    assert report["known_failures"]["queries"]["fixed"] == []


def test_hard_filter_violation_is_never_excused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "violate")
    baseline = _rebaseline(pytester)
    assert "q2" in baseline["known_failures"]["queries"]  # type: ignore[index]
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=3, failed=2)  # and test_gate: the gate fails
    result.stdout.fnmatch_lines(
        [
            "*hard-filter violation at rank 1: d2*",
            "*hard-filter violations are never excused by the baseline",
            "*[[]failed[]] hard filters respected*",
        ]
    )
    assert result.ret == 1


def test_known_invariant_failure_xfails_and_the_gate_counts_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, invariants=True)
    # q3 (unanswerable) is answered although the response reports no_result: the query test
    # fails the answer, threshold compliance the contradiction.
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff-flagged")
    baseline = _rebaseline(pytester)
    recorded = baseline["known_failures"]["invariants"]  # type: ignore[index]
    assert recorded["threshold-compliance-q3"]["reasons"] == ["no-result-with-results"]
    # Without the query tests no test judged the answer: threshold compliance fails it too,
    # a reason the baseline does not record.
    alone = pytester.runpytest(*ARGS, "-m", "searcheval_invariant")
    assert alone.parseoutcomes().get("failed") == 1
    alone.stdout.fnmatch_lines(["*unanswerable query returned 1 result(s); expected none*"])
    # With q3's query test selected, that test judges the answer and the case fails as
    # recorded: a known failure.
    result = pytester.runpytest(*ARGS, "-k", "test_invariant or q3")
    outcomes = result.parseoutcomes()
    known_queries = baseline["known_failures"]["queries"]  # type: ignore[index]
    assert list(known_queries) == ["q3"]
    assert outcomes.get("xfailed", 0) == len(recorded) + 1 and "failed" not in outcomes
    result.stdout.fnmatch_lines(["*[[]passed[]] invariants not below baseline: *"])
    result.stdout.fnmatch_lines(
        ["XFAIL collection.yaml::test_invariant[[]threshold-compliance-q3[]] - known failure *"]
    )
    # Not every query test ran: a partial run, reported beside the full report.
    partial = json.loads((pytester.path / "searcheval-report" / "report-partial.json").read_text())
    assert partial["invariants"]["threshold-compliance-q3"]["ledger"] == "known"


def test_ledger_keys_are_codes_and_subjects_never_text() -> None:
    known = Reason("known-item", "known item 'd1' expected at rank <= 1, found at rank 2", "d1")
    recorded = ledger_entry([known])
    assert recorded is not None and recorded["reasons"] == ["known-item:d1"]
    # The same cause with other evidence, or a reworded message, stays known.
    slipped = Reason("known-item", "known item d1 is now at rank 5 (wanted 1)", "d1", {"rank": 5})
    assert judge_failure([slipped], recorded, False).status == "known"
    # Another missing item is a new reason.
    other = Reason("known-item", "known item 'd7' expected at rank <= 1, found at rank 2", "d7")
    verdict = judge_failure([other], recorded, False)
    assert verdict.status == "new" and "known-item:d7" in verdict.note


def test_judge_failure_branches() -> None:
    recorded = ledger_entry([Reason("churn", "q1 vs q2: RBO 0.1", "q1:q2")])
    assert recorded is not None
    violation = Reason("filter-violation", "hard-filter violation at rank 1: d2: network", "d2")
    assert judge_failure([violation], recorded, False).note.startswith("hard-filter violations")
    drop = Reason("query-drop", "per-query drop: nDCG@10 dropped", "nDCG@10")
    assert ledger_entry([drop]) is None  # compared with the old baseline: never recorded
    assert judge_failure([drop], recorded, False).status == "new"
    assert judge_failure([drop], None, True).note == "regression: this test passed in the baseline"
    assert judge_failure([drop], None, False).status == "new"
