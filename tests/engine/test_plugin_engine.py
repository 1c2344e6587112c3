"""The default target: the reference engine behind its real HTTP service (PostgreSQL + model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_helpers import make_project, read_report

ROOT = Path(__file__).parents[2]

pytest_plugins = ["pytester"]


def test_default_target_serves_the_reference_engine_over_http(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    (pytester.path / "conftest.py").unlink()  # no override: the plugin's own fixture
    pytester.makeini("[pytest]\nsearch_eval_bootstrap_samples = 200\n")
    result = pytester.runpytest_subprocess(
        "--search-eval", "-p", "no:cacheprovider", "-m", "searcheval_query"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 4, result.stdout.str()
    report = read_report(pytester)
    assert report["run"]["queries_run"] == 4 and report["run"]["complete"]
    target = report["environment"]["target"]
    assert target["target"] == "http" and target["url"].startswith("http://127.0.0.1:")
    assert report["environment"]["postgres"] and report["environment"]["pgvector"]
    assert report["model"]["id"] and report["model"]["revision"]
    assert report["profiles"]["hybrid"]["available"]
    assert report["profiles"]["hybrid"]["results_checked"] > 0
    rerank = report["profiles"]["hybrid_rerank"]
    # Unavailable with the engine's reason, or measured: never a silent zero.
    assert rerank["available"] or rerank["reason"]
    counts = report["quality"]["embeddings"]
    assert (counts["listings"], counts["embedded"], counts["fallback"]) == (5, 5, 0)


def test_the_shipped_run_reports_every_listing_embedded(tmp_path: Path) -> None:
    """The shipped collection through the default target (one query selected: the engine
    still indexes the whole catalog): its report carries the engine's counts, and the gate
    rule judges them."""
    run = subprocess.run(
        [
            sys.executable,
            *("-m", "pytest", "--search-eval", "collection.yaml", "-p", "no:cacheprovider"),
            *("-q", "-k", "q002", f"--search-eval-report-dir={tmp_path}"),
            "--search-eval-history=off",
        ],
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "report-partial.json").read_text(encoding="utf-8"))
    counts = report["quality"]["embeddings"]
    assert {k: counts[k] for k in ("listings", "embedded", "failed", "fallback", "reasons")} == {
        "listings": 525,
        "embedded": 525,
        "failed": 0,
        "fallback": 0,
        "reasons": {},
    }
    rule = next(r for r in report["gate"]["rules"] if r["name"] == "no embedding fallback")
    assert rule["status"] == "passed"
    assert "embeddings: 525 of 525 listings embedded, 0 failed, 0 served without one" in (
        run.stdout
    )
