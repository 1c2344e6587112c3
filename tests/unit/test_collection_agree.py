from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from pytest_searcheval.collection import merge_judgments, read_judgments
from pytest_searcheval.collection.cli import main

A = {"q1": {"d1": 3, "d2": 2, "d3": 0, "d4": 1}, "q2": {"d1": 0, "d5": 3}}
B = {"q1": {"d1": 3, "d2": 1, "d3": 2, "d4": 1}, "q2": {"d1": 0, "d5": 0}}


def tsv(path: Path, judgments: dict[str, dict[str, int]]) -> Path:
    rows = [f"{q}\t{d}\t{g}" for q, docs in judgments.items() for d, g in docs.items()]
    path.write_text("query_id\tdoc_id\tgrade\n" + "\n".join(rows) + "\n")
    return path


def test_merge_takes_the_lower_of_one_apart_and_holds_back_two_apart() -> None:
    r = merge_judgments(A, B, grades=[0, 1, 2, 3])
    assert r.merged == {"q1": {"d1": 3, "d2": 1, "d4": 1}, "q2": {"d1": 0}}
    assert [(p.query_id, p.doc_id, p.grade_a, p.grade_b) for p in r.pending] == [
        ("q1", "d3", 0, 2),
        ("q2", "d5", 3, 0),
    ]
    assert r.one_apart == 1
    s = r.agreement
    assert (s.n, s.severe) == (6, 2)
    assert s.exact == pytest.approx(3 / 6) and s.within_one == pytest.approx(4 / 6)
    pairs = sorted((q, d) for q in A for d in A[q])
    expected = cohen_kappa_score(
        [A[q][d] for q, d in pairs],
        [B[q][d] for q, d in pairs],
        weights="quadratic",
        labels=[0, 1, 2, 3],
    )
    assert s.qwk == pytest.approx(expected)


def test_different_pair_sets_are_refused() -> None:
    with pytest.raises(ValueError, match="same pairs"):
        merge_judgments(A, {"q1": B["q1"]})


def test_command_writes_adjudication_then_merges_when_resolved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tsv(tmp_path / "a.tsv", A), tsv(tmp_path / "b.tsv", B)
    out, adj = tmp_path / "merged.tsv", tmp_path / "adj.tsv"
    args = [str(a), str(b), "--out", str(out), "--adjudicate", str(adj)]
    assert main(["agree", *args]) == 3
    text = capsys.readouterr().out
    assert "exact agreement:  0.5000" in text and "severe (>=2 apart): 2" in text
    assert not out.exists()
    rows = adj.read_text().splitlines()
    assert rows[0] == "query_id\tdoc_id\tgrade_a\tgrade_b\tgrade\tnote"
    assert rows[1:] == ["q1\td3\t0\t2\t\t", "q2\td5\t3\t0\t\t"]
    adj.write_text(rows[0] + "\nq1\td3\t0\t2\t1\tborderline\nq2\td5\t3\t0\t3\tB missed it\n")
    assert main(["agree", *args]) == 0
    merged = read_judgments(out)
    assert merged == {"q1": {"d1": 3, "d2": 1, "d3": 1, "d4": 1}, "q2": {"d1": 0, "d5": 3}}
    # A stale adjudication (the judges' grades changed) is refused.
    tsv(b, {"q1": {**B["q1"], "d3": 3}, "q2": B["q2"]})
    assert main(["agree", *args]) == 2
    assert "re-adjudicate" in capsys.readouterr().err


def test_command_reports_file_problems_without_traceback(tmp_path: Path) -> None:
    a = tsv(tmp_path / "a.tsv", A)
    bad = tmp_path / "b.tsv"
    bad.write_bytes(b"query_id\tdoc_id\tgrade\nq1\td1\t9\nq1\t\xff\t1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_searcheval.collection", "agree", str(a), str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}:2 [grade]: grade 9 outside the declared scale" in proc.stderr
    assert f"{bad}:3: not valid UTF-8" in proc.stderr
