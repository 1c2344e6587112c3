"""The per-phase time breakdown: printed with ``-v``, absent without it."""

from __future__ import annotations

import re

import pytest
from plugin_helpers import make_project

from pytest_searcheval.plugin.phases import PhaseRecorder, phase_of

pytest_plugins = ["pytester"]


def test_phase_of_names_the_kind_of_test_and_the_invariant_family() -> None:
    node = "collection.yaml::test_{}"
    assert phase_of(node.format("query[q1-exact-name]"), "call") == "query tests"
    assert phase_of(node.format("query[q1-exact-name]"), "setup") == "fixtures (target start)"
    assert phase_of(node.format("latency[hybrid]"), "call") == "latency hybrid"
    assert phase_of(node.format("invariant[filter-monotonicity-q031]"), "call") == (
        "invariant filter-monotonicity"
    )
    assert phase_of(node.format("invariant[known-item-stability-reindex]"), "call") == (
        "invariant known-item-stability"
    )
    assert phase_of("test_x.py::test_other", "call") == "other tests"


def test_phase_of_knows_a_family_registered_from_a_conftest() -> None:
    from pytest_searcheval.invariants import invariant, registry

    saved = dict(registry.FAMILIES)
    try:
        invariant("top-title")(lambda collection, settings: [])
        assert phase_of("c.yaml::test_invariant[top-title-all]", "call") == "invariant top-title"
    finally:
        registry.FAMILIES.clear()
        registry.FAMILIES.update(saved)


def test_lines_split_the_fixture_setup_by_engine_timings_and_queries_by_profile() -> None:
    facts = {"engine": {"timings": {"server_seconds": 1.5, "calibrate_seconds": 0.25}}}
    recorder = PhaseRecorder({("q1", "lexical"): 30.0, ("q2", "lexical"): 20.0}, lambda: facts)
    recorder.add("fixtures (target start)", 2.0)
    recorder.add("query tests", 0.5)
    recorder.add("query tests", 0.25)
    text = "\n".join(recorder.lines())
    assert re.search(r"fixtures \(target start\)\s+2\.00 s", text)
    assert re.search(r"engine server\s+1\.50 s", text)
    assert re.search(r"engine calibrate\s+0\.25 s", text)
    assert re.search(r"query tests\s+0\.75 s  \(2 reports\)", text)
    assert re.search(r"searches lexical\s+0\.05 s  \(2 searches\)", text)


def test_verbose_run_prints_the_breakdown(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", "-v")
    out = result.stdout.str()
    assert "time by phase" in out
    assert re.search(r"query tests\s+\d+\.\d\d s", out)
    assert re.search(r"searches hybrid\s+\d+\.\d\d s", out)
    assert re.search(r"report \(merge, gate, files\)\s+\d+\.\d\d s", out)
    quiet = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider")
    assert "time by phase" not in quiet.stdout.str()
