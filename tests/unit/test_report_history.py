"""The run history: lines built from a report, appended, read back, plotted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_searcheval.report import history
from pytest_searcheval.report.html import _history_section


def _report(
    ndcg: float, *, relevance_level: int = 2, judgments: str = "sha256:j"
) -> dict[str, Any]:
    def cell(v: float) -> dict[str, Any]:
        return {"mean": v, "low": v - 0.1, "high": v + 0.1, "n": 10}

    return {
        "created": "2026-12-01T10:00:00+00:00",
        "tool": {"version": "0.1.0"},
        "run": {
            "split": "test",
            "gain": "exp",
            "relevance_level": relevance_level,
            "limit": 20,
            "measures": ["nDCG@10", "R@20"],
            "gated_profile": "hybrid",
            "query_measure": "nDCG@10",
            "queries_run": 10,
        },
        "collection": {"name": "tiny", "hashes": {"corpus": "sha256:c", "judgments": judgments}},
        "profiles": {
            "hybrid": {
                "available": True,
                "evaluated": 10,
                "measures": {"nDCG@10": cell(ndcg), "R@20": cell(0.8)},
                "no_result": {"accuracy": 0.5},
            },
            "semantic": {"available": False, "reason": "no index"},
        },
        "gate": {"passed": True},
    }


def test_entry_keeps_means_conventions_hashes_and_verdict() -> None:
    line = history.entry(_report(0.7), git={"commit": "abc", "dirty": False})
    assert line["profiles"] == {
        "hybrid": {
            "measures": {"nDCG@10": 0.7, "R@20": 0.8},
            "evaluated": 10,
            "no_result_accuracy": 0.5,
        }
    }
    assert line["run"]["relevance_level"] == 2 and line["run"]["gated_profile"] == "hybrid"
    assert line["collection"]["hashes"]["judgments"] == "sha256:j"
    assert line["gate"] is True and line["git"] == {"commit": "abc", "dirty": False}
    assert line["history_version"] == history.HISTORY_VERSION


def test_append_read_and_a_torn_or_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "history.jsonl"
    history.append(path, history.entry(_report(0.5)))
    with path.open("a") as handle:  # a write cut short: no newline at the end
        handle.write('{"history_version": 1, "run"')
    history.append(path, history.entry(_report(0.6)))
    with path.open("a") as handle:
        handle.write('[1, 2]\n{"history_version": 1, "run": {}, "profiles": []}\n')
    read = history.read(path)
    assert [e["profiles"]["hybrid"]["measures"]["nDCG@10"] for e in read.entries] == [0.5, 0.6]
    assert len(read.problems) == 3
    assert read.problems[0].startswith(f"{path}:2: not a JSON line")
    assert read.problems[1] == (f"{path}:4: expected an object with history_version 1; skipped")
    assert read.problems[2] == f"{path}:5: fields run and profiles must be objects; skipped"
    assert history.read(tmp_path / "missing.jsonl").entries == []


def test_changes_and_series() -> None:
    lines = [
        history.entry(_report(0.5)),
        history.entry(_report(0.6)),
        history.entry(_report(0.7, relevance_level=1)),
        history.entry(_report(0.7, relevance_level=1, judgments="sha256:k")),
        history.entry(_report(0.8, relevance_level=1, judgments="sha256:k")),
    ]
    assert history.changes(lines) == [2, 3]
    assert history.series(lines, "hybrid", "nDCG@10") == [
        (0, 0.5),
        (1, 0.6),
        (2, 0.7),
        (3, 0.7),
        (4, 0.8),
    ]
    assert history.series(lines, "semantic", "nDCG@10") == []


def test_html_section_plots_a_trend_and_lists_runs(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    assert _history_section(_report(0.5), None) == []
    empty = "".join(_history_section(_report(0.5), history.read(path)))
    assert "No full run recorded yet" in empty
    history.append(path, history.entry(_report(0.5), git={"commit": "f" * 40, "dirty": True}))
    one = "".join(_history_section(_report(0.5), history.read(path)))
    assert "History (1 full runs)" in one and "<svg" not in one
    assert "ffffffffff (dirty)" in one
    history.append(path, history.entry(_report(0.6, relevance_level=1)))
    two = "".join(_history_section(_report(0.6), history.read(path)))
    assert two.count("<svg") == 2  # one panel per gated measure
    assert two.count("stroke-dasharray") == 2  # the conventions changed before run 2
    assert "values across it do not compare" in two
    assert "<td class='num'>0.6000</td>" in two
    with path.open("a") as handle:
        handle.write("not json\n")
    bad = "".join(_history_section(_report(0.6), history.read(path)))
    assert f"{path}:3: not a JSON line" in bad
    assert json.loads(path.read_text().splitlines()[0])["gate"] is True
