"""Report helpers: percentiles, renderings."""

from __future__ import annotations

import pytest

from pytest_searcheval.report import format_interval, nearest_rank


def test_nearest_rank_percentiles() -> None:
    samples = [float(v) for v in range(1, 101)]
    assert nearest_rank(samples, 50) == 50.0
    assert nearest_rank(samples, 95) == 95.0
    assert nearest_rank(samples, 99) == 99.0
    assert nearest_rank([3.0, 1.0, 2.0], 100) == 3.0
    assert nearest_rank([7.0], 95) == 7.0
    assert nearest_rank([], 95) is None


def test_interval_cell_format() -> None:
    assert format_interval({"mean": 0.7341, "low": 0.69, "high": 0.781}) == ".734 [.690,.781]"
    assert format_interval({"mean": 1.0, "low": 1.0, "high": 1.0}) == "1.000 [1.000,1.000]"
    assert format_interval({"mean": None}) == "-"


def test_bootstrap_cis_shares_resamples_and_matches_bootstrap_ci() -> None:
    import numpy as np

    from pytest_searcheval.stats import bootstrap_ci, bootstrap_cis

    rng = np.random.default_rng(3)
    matrix = rng.random((57, 4))
    cis = bootstrap_cis(matrix, samples=500, seed=11)
    for j, ci in enumerate(cis):
        alone = bootstrap_ci(matrix[:, j], samples=500, seed=11)
        assert ci.mean == pytest.approx(alone.mean, abs=1e-12)
        assert ci.low == pytest.approx(alone.low, abs=1e-12)
        assert ci.high == pytest.approx(alone.high, abs=1e-12)
    # Identical columns get identical intervals.
    twin = bootstrap_cis(np.column_stack([matrix[:, 0], matrix[:, 0]]), samples=500, seed=11)
    assert twin[0] == twin[1]
    with pytest.raises(ValueError, match="row 2, column 1 is not finite"):
        bootstrap_cis([[0.1, 0.2], [0.3, 0.4], [0.5, float("nan")]])


def test_invariant_summary_lines() -> None:
    from pytest_searcheval.invariants import summarize
    from pytest_searcheval.report import invariant_lines

    records = [
        {"id": "filter-conformance-c1", "invariant": "filter-conformance", "status": "passed",
         "details": {"violations": 0, "misses": 0}},
        {"id": "filter-conformance-c2", "invariant": "filter-conformance", "status": "failed",
         "details": {"violations": 2, "misses": 1}},
        {"id": "constraint-extraction-network", "invariant": "constraint-extraction",
         "status": "passed",
         "details": {"field": "network", "labelled": 10, "correct": 9, "accuracy": 0.9}},
        {"id": "constraint-extraction-spurious", "invariant": "constraint-extraction",
         "status": "failed", "details": {"spurious": 3}},
        {"id": "deletion-isolation-q1", "invariant": "deletion-isolation", "status": "skipped"},
    ]  # fmt: skip
    lines = invariant_lines(summarize(records))
    assert lines[0] == "invariants:"
    rows = {line.split()[0]: line.split()[1:] for line in lines[3:6]}
    assert rows == {
        "constraint-extraction": ["2", "1", "1", "0"],
        "deletion-isolation": ["1", "0", "0", "1"],
        "filter-conformance": ["2", "1", "1", "0"],
    }
    assert lines[6].startswith("filter conformance: 2 cases, 2 violations")
    assert "1 misses" in lines[6]
    assert lines[7] == (
        "constraint extraction (correct/labelled per field): network 9/10 (0.900); "
        "spurious filters: 3"
    )
    assert invariant_lines(None) == []


def test_paired_randomization_tests_share_signs_and_match_the_single_test() -> None:
    import numpy as np

    from pytest_searcheval.stats import paired_randomization_test, paired_randomization_tests

    rng = np.random.default_rng(4)
    a = rng.random((120, 3))
    b = a + rng.normal(0.01, 0.1, (120, 3))
    b[:, 2] = a[:, 2]  # no difference at all: p = 1 without drawing
    ps = paired_randomization_tests(a, b, permutations=2000, seed=9)
    assert ps == [
        paired_randomization_test(a[:, j], b[:, j], permutations=2000, seed=9) for j in range(3)
    ]
    assert ps[2] == 1.0 and 0.0 < ps[0] < 1.0
    # Exact enumeration for small n, column by column.
    assert paired_randomization_tests([[1.0, 1.0], [2.0, 1.0], [3.0, 0.0]], [[0.0] * 2] * 3) == [
        0.25,
        0.5,
    ]
    with pytest.raises(ValueError, match="one shape"):
        paired_randomization_tests([[1.0]], [[1.0, 2.0]])


def test_the_run_is_tested_against_the_baselines_per_query_values() -> None:
    from pytest_searcheval.report import against_baseline
    from pytest_searcheval.settings import SearchEvalConfig

    cfg = SearchEvalConfig(enabled=True, profiles=("hybrid",), gated_profile="hybrid",
                           permutations=2000)  # fmt: skip
    now = {f"q{i}": 0.9 for i in range(12)}
    base = {"profiles": {"hybrid": {"queries": {f"q{i}": {"nDCG@10": 0.5} for i in range(12)}}}}
    (row,) = against_baseline({("hybrid", "nDCG@10"): now}, base, cfg)
    assert row["n"] == 12 and row["wins"] == 12 and row["losses"] == 0
    assert abs(row["mean_diff"] - 0.4) < 1e-12 and row["p"] < 0.01
    same = against_baseline({("hybrid", "nDCG@10"): {f"q{i}": 0.5 for i in range(12)}}, base, cfg)
    assert same[0]["p"] == 1.0 and same[0]["mean_diff"] == 0.0


def test_the_report_package_exports_no_private_name() -> None:
    import pytest_searcheval.report as report

    assert [n for n in report.__all__ if n.startswith("_")] == []
    assert all(hasattr(report, n) for n in report.__all__)
