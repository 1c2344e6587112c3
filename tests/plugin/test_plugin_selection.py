"""Which generated tests a session collects, as pytest's own rules on arguments would have it,
and how they are named."""

from __future__ import annotations

import pytest
from plugin_helpers import make_project

pytest_plugins = ["pytester"]


def _ide_project(pytester: pytest.Pytester, ini: str = "") -> None:
    # The documented IDE setting: the evaluation on from the ini, no flag on the command line.
    make_project(pytester, ini="search_eval = true\n" + ini)
    tests = pytester.mkdir("tests")
    (tests / "test_unit.py").write_text("def test_unit():\n    pass\n")


def test_a_node_id_elsewhere_runs_that_test_alone(pytester: pytest.Pytester) -> None:
    _ide_project(pytester)
    result = pytester.runpytest("tests/test_unit.py::test_unit", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "test_query" not in result.stdout.str()
    assert not (pytester.path / "searcheval-report").exists()
    # A path is a selection too.
    result = pytester.runpytest("tests", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "searcheval-report").exists()


def test_no_arguments_or_the_anchor_among_them_run_the_evaluation(
    pytester: pytest.Pytester,
) -> None:
    _ide_project(pytester, ini="testpaths = tests\n")
    # testpaths does not name the collection: a plain run still evaluates.
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    assert (pytester.path / "searcheval-report" / "report.json").is_file()
    # The anchor beside another path: both are selected, and the run is complete.
    (pytester.path / "searcheval-report" / "report.json").unlink()
    result = pytester.runpytest("collection.yaml", "tests/test_unit.py", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=5)
    assert (pytester.path / "searcheval-report" / "report.json").is_file()
    # A directory above the anchor selects it.
    result = pytester.runpytest(".", "-p", "no:cacheprovider", "--co", "-q")
    result.stdout.fnmatch_lines(["collection.yaml::test_query[[]q1-exact-name[]]"])


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        ("search_eval_limit = abc\n", "ini search_eval_limit: expected an integer, got 'abc'"),
        ("search_eval_gain = log\n", "ini search_eval_gain: expected one of exp, linear"),
    ],
)
def test_bad_ini_values_are_usage_errors_when_the_ini_turns_it_on(
    pytester: pytest.Pytester, ini: str, message: str
) -> None:
    _ide_project(pytester, ini=ini)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines([f"*{message}*"])
    # --help still answers.
    assert pytester.runpytest("--help").ret == 0
