"""The ``searcheval`` command on a report produced by a real plugin run."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import make_project

from pytest_searcheval.cli import main

pytest_plugins = ["pytester"]


def test_report_rerenders_a_saved_report(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    make_project(pytester)
    pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    saved = pytester.path / "searcheval-report" / "report.json"
    capsys.readouterr()
    assert main(["report", "--json", str(saved)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("collection tiny split=test queries=4/4")
    assert "gate: PASSED" in out
    html = pytester.path / "again.html"
    assert main(["report", "--json", str(saved), "--format", "html", "--out", str(html)]) == 0
    assert html.read_text().startswith("<!doctype html>")
    assert main(["report", "--json", str(saved), "--format", "markdown"]) == 0
    assert "| hybrid |" in capsys.readouterr().out


def test_report_rejects_other_schema_versions(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "r.json"
    path.write_text(json.dumps({"schema_version": 99}))
    assert main(["report", "--json", str(path)]) == 2
    assert "field schema_version: expected 1, got 99" in capsys.readouterr().err
    path.write_text("{not json")
    assert main(["report", "--json", str(path)]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_baseline_verify_statuses(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "baseline.json"
    path.write_text(json.dumps({"tag": "v1"}))
    assert main(["baseline-verify", "--baseline", str(path)]) == 0
    assert "[unverified]" in capsys.readouterr().out
    assert main(["baseline-verify", "--baseline", str(path), "--strict"]) == 1


def test_report_carries_grades_and_the_html_lists_every_query(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plugin_helpers import JUDGMENTS, read_report

    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")  # q3 answered with d2, which nobody judged
    pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    report = read_report(pytester)
    judged = {(q, d): g for q, d, g in JUDGMENTS}
    for qid, entry in report["queries"].items():
        for data in entry["profiles"].values():
            assert data["grades"] == [judged.get((qid, d)) for d in data["ids"]]
    assert report["queries"]["q3"]["profiles"]["hybrid"]["grades"] == [None]
    page = (pytester.path / "searcheval-report" / "report.html").read_text()
    table = page.split("<table id='queries'", 1)[1].split("</table>", 1)[0]
    assert [f"data-q='{q}'" in table for q in ("q1", "q2", "q3", "q4")] == [True] * 4
    assert "(?)" in table


def test_history_grows_by_full_runs_only(pytester: pytest.Pytester) -> None:
    from plugin_helpers import read_report

    from pytest_searcheval.report import history

    make_project(pytester)
    path = pytester.path / "searcheval-report" / "history.jsonl"
    first = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    first.stdout.fnmatch_lines(["searcheval: appended this run to searcheval-report/history.jsonl"])
    lexical = read_report(pytester)["profiles"]["lexical"]["measures"]["nDCG@10"]["mean"]
    pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    partial = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "-k", "q2")
    assert "appended this run" not in partial.stdout.str()
    read = history.read(path)
    assert read.problems == [] and len(read.entries) == 2
    assert read.entries[0]["run"]["split"] == "test" and read.entries[0]["queries"] == 4
    assert read.entries[1]["profiles"]["lexical"]["measures"]["nDCG@10"] == lexical
    page = (pytester.path / "searcheval-report" / "report.html").read_text()
    assert "History (2 full runs)" in page
    pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "--search-eval-history=off")
    assert len(history.read(path).entries) == 2


def test_report_shows_the_no_result_trade_off_from_the_targets_confidence(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plugin_helpers import read_report

    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "confidence")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    report = read_report(pytester)
    curve = report["no_result_tradeoff"]["hybrid"]
    assert curve["threshold"] == 0.5 and curve["n_unanswerable"] >= 1
    at = curve["at_threshold"]
    assert at["caught"] == curve["n_unanswerable"]  # 'unicorn rentals' shares no word
    line = next(x for x in result.outlines if x.startswith("no-result trade-off (hybrid"))
    assert f"at threshold 0.5 catches {at['caught']}/{curve['n_unanswerable']}" in line
    page = (pytester.path / "searcheval-report" / "report.html").read_text()
    assert "<h2>No-result trade-off</h2>" in page
    assert (
        "no-result trade-off (hybrid"
        in (pytester.path / "searcheval-report" / "report.md").read_text()
    )
