"""The example projects under examples/ run as a newcomer runs them: copied somewhere else,
``pytest --search-eval`` in their directory, in a fresh process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Each test starts other processes (xdist workers, gateways or a user's run): slow.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _copy(example: str, tmp_path: Path) -> Path:
    work = tmp_path / example
    shutil.copytree(
        EXAMPLES / example,
        work,
        ignore=shutil.ignore_patterns("searcheval-report", "__pycache__", ".pytest_cache"),
    )
    return work


def _pytest(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--search-eval", "-p", "no:cacheprovider", *args],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )


def _report(work: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((work / "searcheval-report" / "report.json").read_text())
    return data


def test_beir_collection_against_tantivy(tmp_path: Path) -> None:
    pytest.importorskip("tantivy")
    work = _copy("beir-tantivy", tmp_path)
    done = _pytest(work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = _report(work)
    assert report["run"]["queries_run"] == report["run"]["queries_expected"] == 22
    assert report["collection"]["documents"] == 60
    for profile in ("plain", "stemmed"):
        assert report["profiles"][profile]["available"]
        assert report["profiles"][profile]["evaluated"] == 22
    rules = {r["name"]: r["status"] for r in report["gate"]["rules"]}
    assert rules["stemmed nDCG@10 vs baseline"] == "passed"
    assert rules["dataset and model unchanged"] == "passed"
    # the same engine on the same data gives the committed baseline's numbers exactly
    baseline = json.loads((work / "baselines" / "baseline.json").read_text())
    for m in ("nDCG@10", "R@20"):
        now = report["profiles"]["stemmed"]["measures"][m]["mean"]
        assert now == pytest.approx(baseline["profiles"]["stemmed"]["aggregates"][m], abs=1e-12)
    assert "<table id='queries'" in (work / "searcheval-report" / "report.html").read_text()


def test_beir_example_gate_fails_when_the_engine_gets_worse(tmp_path: Path) -> None:
    pytest.importorskip("tantivy")
    work = _copy("beir-tantivy", tmp_path)
    conftest = work / "conftest.py"
    text = conftest.read_text()
    assert '"stemmed": "en_stem"' in text
    conftest.write_text(text.replace('"stemmed": "en_stem"', '"stemmed": "default"'))
    done = _pytest(work)
    assert done.returncode != 0
    assert "[failed] stemmed nDCG@10 vs baseline" in done.stdout


def test_trec_example_runs_are_what_make_runs_writes() -> None:
    pytest.importorskip("tantivy")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "trec-runs" / "make_runs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_two_trec_runs_with_the_gate_on_one(tmp_path: Path) -> None:
    work = _copy("trec-runs", tmp_path)
    done = _pytest(work)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = _report(work)
    assert report["run"]["gated_profile"] == "stemmed"
    assert report["run"]["queries_run"] == 22
    assert all(report["profiles"][p]["available"] for p in ("plain", "stemmed"))
    pair = {(c["a"], c["b"], c["measure"]) for c in report["comparisons"]}
    assert {("plain", "stemmed", "nDCG@10"), ("plain", "stemmed", "R@20")} <= pair
    rules = {r["name"]: r["status"] for r in report["gate"]["rules"]}
    assert rules["stemmed >= plain on nDCG@10"] == "passed"
    assert rules["stemmed nDCG@10 vs baseline"] == "passed"
    assert rules["dataset and model unchanged"] == "passed"


def test_trec_example_gate_fails_when_the_gated_run_gets_worse(tmp_path: Path) -> None:
    work = _copy("trec-runs", tmp_path)
    plain = (work / "runs" / "plain.run").read_text()
    (work / "runs" / "stemmed.run").write_text(plain.replace("tantivy-plain", "tantivy-stemmed"))
    done = _pytest(work)
    assert done.returncode != 0
    assert "[failed] stemmed nDCG@10 vs baseline" in done.stdout
