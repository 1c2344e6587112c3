"""Ranking snapshots through pytester: what a CI run does with a snapshot never recorded."""

from __future__ import annotations

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
