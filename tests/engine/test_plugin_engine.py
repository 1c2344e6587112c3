"""The default target: the reference engine behind its real HTTP service (PostgreSQL + model)."""

from __future__ import annotations

import pytest
from plugin_helpers import make_project, read_report

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
