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
