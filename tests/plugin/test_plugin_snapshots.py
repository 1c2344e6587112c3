"""Ranking snapshots through pytester: what a CI run does with a snapshot never recorded, and
the entries no test checks any more (reported, removed by an update, judged only when exact)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from plugin_helpers import make_project

pytest_plugins = ["pytester"]

RUN = ("--search-eval", "-p", "no:cacheprovider")
HAND = ("-k", "not test_query and not test_invariant")

SNAPSHOT = """
def test_rankings(searcheval, ranking_snapshot):
    for q in ["weather forecast", "stock prices"]:
        ranking_snapshot.check(searcheval.search(q))
"""
SNAPFILE = "__rankings__/test_snap/test_rankings.yaml"


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # The runs below choose for themselves whether they are CI runs.
    for variable in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(variable, raising=False)


def _project(pytester: pytest.Pytester, ini: str = "") -> None:
    make_project(pytester, ini=ini)
    pytester.makepyfile(test_snap=SNAPSHOT)


@pytest.mark.parametrize("variable", ["CI", "BUILD_NUMBER"])
def test_in_ci_a_missing_snapshot_fails_and_says_how_to_record_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    _project(pytester)
    monkeypatch.setenv(variable, "true")
    args = (*RUN, "test_snap.py", *HAND)
    result = pytester.runpytest(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"E * no ranking snapshot 'weather forecast' in {SNAPFILE}, and a missing snapshot "
            f"fails this run (the {variable} environment variable is set: a CI run records no "
            "snapshot (ini search_eval_snapshot_strict = false records there too)).",
            "E * Record it where the ranking is known to be right, review the file and commit it:",
            "E *   pytest --search-eval --search-eval-snapshot-update test_snap.py::test_rankings",
        ]
    )
    assert "recorded ranking snapshot" not in result.stdout.str()
    assert not (pytester.path / SNAPFILE).exists()

    # The command it gives records the snapshot, in CI too; later CI runs compare with it.
    update = pytester.runpytest(*args, "--search-eval-snapshot-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines([f"searcheval: recorded ranking snapshot {SNAPFILE}"])
    pytester.runpytest(*args).assert_outcomes(passed=1)

    # A name the file does not hold yet fails as a missing file does.
    pytester.makepyfile(test_snap=SNAPSHOT.replace('"stock prices"', '"rain forecast city"'))
    again = pytester.runpytest(*args)
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines([f"E * no ranking snapshot 'rain forecast city' in {SNAPFILE}*"])


def test_an_empty_ci_variable_is_not_a_ci_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    monkeypatch.setenv("CI", "")
    result = pytester.runpytest(*RUN, "test_snap.py", *HAND)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"searcheval: recorded ranking snapshot {SNAPFILE}"])


def test_the_strict_setting_decides_over_the_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    args = (*RUN, "test_snap.py", *HAND)
    strict = pytester.runpytest(*args, "--search-eval-snapshot-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(
        [
            "E * fails this run (--search-eval-snapshot-strict (or ini "
            "search_eval_snapshot_strict) is on).",
        ]
    )
    ini = (pytester.path / "tox.ini").read_text()
    pytester.makeini(ini.rstrip() + "\nsearch_eval_snapshot_strict = true\n")
    pytester.runpytest(*args).assert_outcomes(failed=1)
    assert not (pytester.path / SNAPFILE).exists()

    # ini false: a CI job that wants the first run to record gets it.
    pytester.makeini(ini.rstrip() + "\nsearch_eval_snapshot_strict = false\n")
    monkeypatch.setenv("CI", "1")
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1)
    assert (pytester.path / SNAPFILE).is_file()


# --- unused entries ----------------------------------------------------------------------------

CASES = """
import os
import pytest

QUERIES = os.environ.get("QUERIES", "weather forecast,stock prices").split(",")
CASES = os.environ.get("CASES", "rain forecast city,stock screener").split(",")

def test_rankings(searcheval, ranking_snapshot):
    for q in QUERIES:
        ranking_snapshot.check(searcheval.search(q))
    assert not os.environ.get("FAIL")

@pytest.mark.parametrize("q", CASES)
def test_case(searcheval, ranking_snapshot, q):
    ranking_snapshot.check(searcheval.search(q))
"""
CASE = "__rankings__/test_snap/test_case_{}.yaml"


def _unused(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(
        (i for i, x in enumerate(lines) if x.startswith("searcheval: ") and ("unused" in x)), None
    )
    if start is None:
        return []
    out = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


def _stale(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, run: Callable[[], Any]
) -> None:
    """Record every snapshot of CASES, then check one query and one case fewer."""
    make_project(pytester)
    pytester.makepyfile(test_snap=CASES)
    result = run()
    result.assert_outcomes(passed=3)
    assert _unused(result.stdout.str()) == []
    monkeypatch.setenv("QUERIES", "weather forecast")
    monkeypatch.setenv("CASES", "rain forecast city")


@pytest.mark.parametrize("how", ["CI", "--search-eval-snapshot-strict"])
def test_a_strict_run_fails_on_unused_entries(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """As a missing snapshot does: every test passes, and the session fails on the entries no
    test checks, saying why; an update removes them and passes, in CI too."""
    args = (*RUN, *HAND)
    _stale(pytester, monkeypatch, lambda: pytester.runpytest(*args))
    strict = args
    if how == "CI":
        monkeypatch.setenv("CI", "true")
    else:
        strict = (*args, how)
    run = pytester.runpytest(*strict)
    run.assert_outcomes(passed=2)
    assert run.ret == pytest.ExitCode.TESTS_FAILED
    lines = run.stdout.str().splitlines()
    assert (
        "searcheval: 2 ranking snapshots unused; --search-eval-snapshot-update removes them:"
        in lines
    )
    verdict = [x for x in lines if x.startswith("searcheval: unused ranking snapshots fail")]
    reason = (
        "the CI environment variable is set" if how == "CI" else "--search-eval-snapshot-strict"
    )
    assert len(verdict) == 1 and reason in verdict[0]
    # ini search_eval_snapshot_strict = false: reported, not failed
    relaxed = pytester.runpytest(*args, "-o", "search_eval_snapshot_strict=false")
    assert relaxed.ret == pytest.ExitCode.OK
    update = pytester.runpytest(*strict, "--search-eval-snapshot-update")
    update.assert_outcomes(passed=2)
    assert update.ret == pytest.ExitCode.OK
    assert pytester.runpytest(*strict).ret == pytest.ExitCode.OK


def test_unused_entries_are_reported_and_removed_by_an_update(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = (*RUN, *HAND)
    # One query no longer checked, one case gone: reported, nothing removed.
    _stale(pytester, monkeypatch, lambda: pytester.runpytest(*args))
    snap = pytester.path / SNAPFILE
    text = snap.read_text()
    case = f"  {CASE.format('stock_screener')}: the whole file: no test of test_snap.py keeps "
    case += 'rankings in it: "stock screener"'
    entry = f'  {SNAPFILE}: "stock prices"'
    run = pytester.runpytest(*args)
    run.assert_outcomes(passed=2)
    assert _unused(run.stdout.str()) == [
        "searcheval: 2 ranking snapshots unused; --search-eval-snapshot-update removes them:",
        case,
        entry,
    ]
    assert snap.read_text() == text
    assert (pytester.path / CASE.format("stock_screener")).is_file()

    # A failed test's entries are not judged: its later checks never ran.
    monkeypatch.setenv("FAIL", "1")
    failed = pytester.runpytest(*args)
    failed.assert_outcomes(passed=1, failed=1)
    assert _unused(failed.stdout.str()) == [
        "searcheval: 1 ranking snapshot unused; --search-eval-snapshot-update removes it:",
        case,
    ]
    monkeypatch.delenv("FAIL")

    update = pytester.runpytest(*args, "--search-eval-snapshot-update")
    update.assert_outcomes(passed=2)
    assert _unused(update.stdout.str()) == [
        "searcheval: removed 2 unused ranking snapshots:",
        case,
        entry,
    ]
    assert not (pytester.path / CASE.format("stock_screener")).exists()
    # the file as a run checking the one query records it: header, then the entry kept
    assert snap.read_text() == (
        text[: text.index('"stock prices":')] + text[text.index('"weather forecast":') :]
    )
    assert _unused(pytester.runpytest(*args).stdout.str()) == []


@pytest.mark.parametrize(
    "selection",
    [
        ("-k", "test_rankings"),
        ("test_snap.py::test_rankings",),
        ("test_snap.py::test_case",),
        ("--deselect", "test_snap.py::test_case[rain forecast city]"),
        ("--lf",),
    ],
)
def test_a_partial_run_judges_only_the_tests_it_ran(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, selection: tuple[str, ...]
) -> None:
    run = ("--search-eval", *HAND)
    _stale(pytester, monkeypatch, lambda: pytester.runpytest(*run))
    if selection == ("--lf",):
        monkeypatch.setenv("FAIL", "1")
        pytester.runpytest(*run).assert_outcomes(passed=1, failed=1)
        monkeypatch.delenv("FAIL")
    args = (*run, *selection, "--search-eval-snapshot-update")
    result = pytester.runpytest(*args)
    assert result.ret == 0, result.stdout.str()
    lines = _unused(result.stdout.str())
    # The case that is gone is judged only by a run that collected its module whole.
    assert (pytester.path / CASE.format("stock_screener")).is_file()
    assert not any("stock_screener" in line for line in lines)
    ran_rankings = selection != ("test_snap.py::test_case",)
    # test_rankings ran and passed: its own entry no longer checked is judged.
    assert (
        lines == ["searcheval: removed 1 unused ranking snapshot:", f'  {SNAPFILE}: "stock prices"']
    ) == ran_rankings
    assert ('"stock prices"' in (pytester.path / SNAPFILE).read_text()) != ran_rankings


def test_the_snapshots_of_a_module_that_is_gone_are_unused(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_snap=SNAPSHOT, test_gone=SNAPSHOT)
    args = (*RUN, *HAND)
    pytester.runpytest(*args).assert_outcomes(passed=2)
    gone = pytester.path / "__rankings__" / "test_gone"
    assert (gone / "test_rankings.yaml").is_file()
    (pytester.path / "test_gone.py").unlink()
    line = (
        "  __rankings__/test_gone/test_rankings.yaml: the whole file: no test of test_gone.py "
        'keeps rankings in it: "stock prices", "weather forecast"'
    )
    # Only a run that collected test_snap.py whole looks beside it.
    assert _unused(pytester.runpytest(*args, "test_snap.py::test_rankings").stdout.str()) == []
    assert _unused(pytester.runpytest(*args).stdout.str())[1:] == [line]
    update = pytester.runpytest(*args, "--search-eval-snapshot-update")
    assert _unused(update.stdout.str()) == ["searcheval: removed 2 unused ranking snapshots:", line]
    assert not gone.exists() and (pytester.path / SNAPFILE).is_file()


@pytest.mark.slow  # xdist workers are processes
def test_under_xdist_the_unused_entries_are_the_serial_ones(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = (*RUN, *HAND)
    _stale(pytester, monkeypatch, lambda: pytester.runpytest_subprocess(*args))
    serial = pytester.runpytest_subprocess(*args, "-p", "xdist", "-n", "0")
    xdist = pytester.runpytest_subprocess(*args, "-n", "2")
    assert len(_unused(serial.stdout.str())) == 3
    assert _unused(xdist.stdout.str()) == _unused(serial.stdout.str())
    # Each worker ran some of the tests: the controller judges their usage together.
    folder = pytester.path / "__rankings__" / "test_snap"
    before = {p.name: p.read_text() for p in folder.iterdir()}
    update = pytester.runpytest_subprocess(*args, "-n", "2", "--search-eval-snapshot-update")
    assert _unused(update.stdout.str())[1:] == _unused(serial.stdout.str())[1:]
    assert sorted(p.name for p in folder.iterdir()) == [
        "test_case_rain_forecast_city.yaml",
        "test_rankings.yaml",
    ]
    assert '"stock prices"' in before["test_rankings.yaml"]
    assert '"stock prices"' not in (folder / "test_rankings.yaml").read_text()
