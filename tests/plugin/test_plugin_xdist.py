"""Serial, ``-n 2`` and ``-p no:xdist`` runs give the same report; latency tests and xdist."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import make_project, read_report, without_timings

# Each test starts other processes (xdist workers, gateways or a user's run): slow.
pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]


def _run(pytester: pytest.Pytester, *args: str) -> tuple[int, dict[str, object]]:
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", *args)
    return int(result.ret), read_report(pytester)


def test_serial_xdist_and_no_xdist_reports_are_identical(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    # One failing query, so failures and their messages are compared as well.
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")
    ret_serial, serial = _run(pytester, "-p", "xdist", "-n", "0")
    ret_xdist, xdist = _run(pytester, "-n", "2")
    ret_plain, plain = _run(pytester, "-p", "no:xdist")
    assert ret_serial == ret_xdist == ret_plain == 1
    assert xdist["run"]["xdist_workers"] == 2  # type: ignore[index]
    assert serial["run"]["xdist_workers"] == 0  # type: ignore[index]
    assert serial["queries"]["q3"]["failures"]  # type: ignore[index]
    a, b, c = (json.dumps(without_timings(r), sort_keys=True) for r in (serial, xdist, plain))
    assert a == b == c
    # The target description reached the controller from the workers.
    assert xdist["environment"]["target"]["target"] == "callable"  # type: ignore[index]


def test_latency_tests_gate_p95_and_p99(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When this suite itself runs under -n 2 the child would inherit PYTEST_XDIST_WORKER, and
    # pytest-benchmark disables itself on seeing it.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    make_project(pytester)
    ok = pytester.runpytest_subprocess(
        "--search-eval",
        "-p",
        "no:xdist",
        "--search-eval-latency-p95-ms",
        "1000",
        "--search-eval-latency-rounds",
        "30",
        "-v",
    )
    ok.stdout.fnmatch_lines(
        [
            "*collection.yaml::test_latency[[]hybrid[]] PASSED*",
            "latency hybrid: p50 * ms, p95 * ms, p99 * ms over 30 requests",
        ]
    )
    latency = read_report(pytester)["latency_tests"]["hybrid"]
    assert latency["n"] == 30 and len(latency["samples_ms"]) == 30
    assert latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]

    slow = pytester.runpytest_subprocess(
        "--search-eval",
        "-p",
        "no:xdist",
        "--search-eval-latency-p99-ms",
        "0.0001",
        "--search-eval-latency-rounds",
        "10",
    )
    assert slow.ret == 1
    slow.stdout.fnmatch_lines(
        ["*latency of profile 'hybrid' over budget (10 requests, *): p99 * ms > budget 0.0001 ms"]
    )


def test_latency_profiles_time_each_named_profile_against_the_budgets(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    make_project(pytester)
    result = pytester.runpytest_subprocess(
        "--search-eval", "-p", "no:xdist", "--search-eval-latency-p95-ms", "1000",
        "--search-eval-latency-rounds", "10", "--search-eval-latency-profiles", "hybrid,lexical",
        "-v",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines_random(
        [
            "*collection.yaml::test_latency[[]hybrid[]] PASSED*",
            "*collection.yaml::test_latency[[]lexical[]] PASSED*",
            "*[[]passed[]] latency budgets: hybrid p95 * ms (budget 1000); "
            "lexical p95 * ms (budget 1000)",
        ]
    )
    latency = read_report(pytester)["latency_tests"]
    assert sorted(latency) == ["hybrid", "lexical"]
    assert latency["lexical"]["profile"] == "lexical" and latency["lexical"]["n"] == 10


def test_latency_is_gated_under_xdist_as_in_a_serial_run(pytester: pytest.Pytester) -> None:
    # pytest-benchmark disables itself on xdist workers; the latency test times its rounds
    # itself there instead of skipping, so `-n 2` gates p95 and p99 as a serial run does.
    make_project(pytester)
    result = pytester.runpytest_subprocess(
        "--search-eval", "-n", "2", "--search-eval-latency-p95-ms", "1000",
        "--search-eval-latency-rounds", "20", "-rs",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "latency hybrid: p50 * ms, p95 * ms, p99 * ms over 20 requests",
            "*[[]passed[]] latency budgets: hybrid p95 * ms (budget 1000)",
        ]
    )
    latency = read_report(pytester)["latency_tests"]["hybrid"]
    assert latency["n"] == 20 and len(latency["samples_ms"]) == 20
    assert latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    slow = pytester.runpytest_subprocess(
        "--search-eval", "-n", "2", "--search-eval-latency-p99-ms", "0.0001",
        "--search-eval-latency-rounds", "10",
    )  # fmt: skip
    assert slow.ret == 1
    slow.stdout.fnmatch_lines(
        ["*latency of profile 'hybrid' over budget (10 requests, *): p99 * ms > budget 0.0001 ms"]
    )


def test_a_benchmark_switched_off_leaves_the_budgets_unmeasured_and_fails_a_strict_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    make_project(pytester)
    args = ("--search-eval", "-p", "no:xdist", "--search-eval-latency-p95-ms", "1000")
    result = pytester.runpytest_subprocess(*args, "--benchmark-disable", "-rs")
    result.stdout.fnmatch_lines(
        [
            "latency hybrid: not measured: pytest-benchmark is disabled (--benchmark-disable)",
            "*[[]skipped[]] latency budgets: not measured: pytest-benchmark is disabled*",
        ]
    )
    result.assert_outcomes(passed=4, skipped=1)
    # Budgets that were not measured fail a strict gate instead of passing quietly.
    strict = pytester.runpytest_subprocess(
        *args, "--benchmark-disable", "--search-eval-strict-baseline"
    )
    strict.stdout.fnmatch_lines(["*[[]failed[]] latency budgets: not measured:*(strict)"])
    assert strict.ret == 1
