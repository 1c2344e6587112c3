"""A target's embedding counts reach the report (``quality.embeddings``), the terminal, and the
gate rule "no embedding fallback"; a target without them leaves the rule not measured."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import make_project, read_report

TARGET = 'CallableTarget(fake, profiles=["lexical", "semantic", "hybrid"])'
WITH_COUNTS = (
    'CallableTarget(fake, profiles=["lexical", "semantic", "hybrid"],'
    ' description={"embeddings": json.loads(os.environ["SEARCHEVAL_EMBEDDINGS"])})'
)


def project_with_counts(pytester: pytest.Pytester, ini: str = "") -> None:
    make_project(pytester, ini=ini)
    conftest = pytester.path / "conftest.py"
    text = conftest.read_text(encoding="utf-8")
    assert TARGET in text
    conftest.write_text("import json\n" + text.replace(TARGET, WITH_COUNTS), encoding="utf-8")


def counts(**overrides: object) -> str:
    base = {"listings": 5, "embedded": 5, "failed": 0, "fallback": 0, "reasons": {}}
    return json.dumps(base | overrides)


def test_complete_counts_fill_the_report_and_pass_the_rule(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project_with_counts(pytester)
    monkeypatch.setenv("SEARCHEVAL_EMBEDDINGS", counts())
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*embeddings: 5 of 5 listings embedded, 0 failed, 0 served without one",
            "*gate: PASSED*",
            "*[[]passed[]] no embedding fallback: 5 of 5 listings embedded, 0 failed, "
            "0 served without their embedding; tolerance 0",
        ]
    )
    quality = read_report(pytester)["quality"]
    assert quality["embeddings"] == json.loads(counts())
    assert "embeddings" not in quality["not_measured"]
    md = (pytester.path / "searcheval-report" / "report.md").read_text(encoding="utf-8")
    assert "embeddings: 5 of 5 listings embedded, 0 failed, 0 served without one" in md


def test_a_fallback_fails_the_gate_unless_tolerated(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project_with_counts(pytester)
    monkeypatch.setenv(
        "SEARCHEVAL_EMBEDDINGS",
        counts(embedded=4, failed=1, fallback=1, reasons={"TimeoutError": 1}),
    )
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)  # test_gate
    result.stdout.fnmatch_lines(
        [
            "*[[]failed[]] no embedding fallback: 4 of 5 listings embedded, "
            "1 failed (TimeoutError 1), 1 served without their embedding; tolerance 0",
        ]
    )
    assert read_report(pytester)["quality"]["embeddings"]["fallback"] == 1
    result = pytester.runpytest(
        "--search-eval", "--search-eval-embedding-fallback-tolerance=1", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*[[]passed[]] no embedding fallback: *; tolerance 1"])


def test_a_count_that_is_not_a_count_fails_the_rule(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project_with_counts(pytester)
    monkeypatch.setenv("SEARCHEVAL_EMBEDDINGS", counts(fallback="none"))
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*[[]failed[]] no embedding fallback: "
            "embeddings.fallback is 'none', expected a count >= 0"
        ]
    )


def test_without_counts_the_rule_is_not_measured(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*gate: PASSED*",
            "*[[]skipped[]] no embedding fallback: not measured: "
            "the target reports no embedding counts",
        ]
    )
    assert read_report(pytester)["quality"]["embeddings"] is None
