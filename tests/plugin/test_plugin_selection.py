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


def test_pytest_counts_the_generated_tests_as_collected(pytester: pytest.Pytester) -> None:
    # The collection lies outside testpaths, so its tests are generated after pytest has
    # collected the test files; its header still counts them, and what -k deselects.
    _ide_project(pytester, ini="testpaths = tests\n")
    # 1 unit test, 4 query tests and 18 invariant cases, deselected: this target cannot run them
    result = pytester.runpytest("-p", "no:cacheprovider", "--co", "-q")
    result.stdout.fnmatch_lines(["5/23 tests collected (18 deselected) in *"])
    result = pytester.runpytest("-p", "no:cacheprovider", "-k", "test_unit")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["collected 23 items / 22 deselected / 1 selected"])


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


def _beir_numeric(pytester: pytest.Pytester, n: int = 12) -> None:
    # A BEIR collection with numeric query ids, as most public sets have; no classes.
    pytester.makefile(
        ".jsonl",
        corpus="".join(f'{{"_id": "d{i}", "title": "t{i}", "text": "w{i}"}}\n' for i in range(n)),
        queries="".join(f'{{"_id": "{i}", "text": "w{i}"}}\n' for i in range(1, n + 1)),
    )
    pytester.mkdir("qrels")
    (pytester.path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{i}\td{i % n}\t1\n" for i in range(1, n + 1))
    )
    pytester.makeconftest(
        "import pytest\n"
        "from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse\n"
        "@pytest.fixture(scope='session')\n"
        "def searcheval_target():\n"
        "    return CallableTarget(\n"
        "        lambda q, **kw: SearchResponse(hits=(Hit('d' + q[1:], 1.0),))\n"
        "    )\n"
    )


def test_a_collection_without_classes_has_ids_without_a_class(
    pytester: pytest.Pytester,
) -> None:
    _beir_numeric(pytester)
    result = pytester.runpytest(
        "--search-eval", "-p", "no:cacheprovider", "--co", "-q", "-m", "searcheval_query"
    )
    ids = [line for line in result.stdout.lines if "test_query[" in line]
    assert len(ids) == 12 and "queries.jsonl::test_query[1]" in ids, ids
    assert not any("generic" in i for i in ids)
    # What docs/configuration.md gives for a numeric id: the bracketed name, not the bare
    # number (-k 1 matches 1, 10, 11, 12 and every other name with a 1 in it).
    result = pytester.runpytest(
        "--search-eval", "-p", "no:cacheprovider", "--co", "-q", "-k", "test_query[1]"
    )
    picked = [line for line in result.stdout.lines if "::" in line]
    assert picked == ["queries.jsonl::test_query[1]"], result.stdout.str()
    result = pytester.runpytest(
        "--search-eval", "-p", "no:cacheprovider", "--co", "-q", "-k", "test_query and 1]"
    )
    picked = [line for line in result.stdout.lines if "::" in line]
    assert picked == ["queries.jsonl::test_query[1]", "queries.jsonl::test_query[11]"], picked


QRELS = "1 0 d1 1\n2 0 d2 1\n3 0 d3 1\n"
TOPICS = "1\tred apples\n2\tgreen pears\n3\tcherry jam\n"
RUN = "1 Q0 d1 1 2.0 bm25\n2 Q0 d1 1 2.0 bm25\n3 Q0 d3 1 1.0 bm25\n"


def test_run_files_collect_no_invariant_they_cannot_run(pytester: pytest.Pytester) -> None:
    (pytester.path / "qrels.txt").write_text(QRELS)
    (pytester.path / "topics.tsv").write_text(TOPICS)
    (pytester.path / "bm25.run").write_text(RUN)
    pytester.makeini(
        "[pytest]\nsearch_eval_qrels = qrels.txt\nsearch_eval_topics = topics.tsv\n"
        "search_eval_run = bm25.run\nsearch_eval_bootstrap_samples = 50\n"
        "search_eval_permutations = 50\n"
    )
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "-rs")
    # Three query tests and no skipped invariant (before: one per query and family): the
    # cases are left out at collection, with one line saying why.
    assert "test_invariant" not in result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes == {"passed": 3}, outcomes
    result.stdout.fnmatch_lines(
        [
            "searcheval: 6 invariant case(s) not collected (deletion-isolation, "
            "threshold-compliance): run files "
            "are fixed rankings; the invariants need a live system"
        ]
    )


def test_a_read_only_service_collects_no_mutating_invariant(pytester: pytest.Pytester) -> None:
    from pytest_searcheval.collection import load
    from pytest_searcheval.invariants import cases

    make_project(pytester, invariants=True, ini="search_eval_url = http://127.0.0.1:9/\n")
    # The conftest's own target would be known only at run time: the plugin's default serves.
    (pytester.path / "conftest.py").unlink()
    mutating = [c.id for c in cases(load(pytester.path)) if c.mutates]
    assert mutating, "the tiny collection has mutating cases (duplicate-resistance, ...)"
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "--co", "-q")
    out = result.stdout.str()
    assert "test_invariant[threshold-compliance-q1]" in out
    assert not any(f"test_invariant[{c}]" in out for c in mutating), out
    result.stdout.fnmatch_lines(
        [
            "searcheval: * invariant case(s) not collected (deletion-isolation, "
            "duplicate-resistance, known-item-stability): an HTTP service is read-only*"
        ]
    )


def test_a_read_only_conftest_target_skips_once_per_mutating_family(
    pytester: pytest.Pytester,
) -> None:
    from pytest_searcheval.collection import load
    from pytest_searcheval.invariants import cases

    # The conftest's CallableTarget is read-only, which is known only once it is built.
    make_project(pytester, invariants=True)
    listed = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "--co", "-q")
    # the mutating cases: the two mutating families and known-item stability's re-index case
    mutating = [
        line
        for line in listed.stdout.lines
        if "test_invariant[deletion-isolation-" in line
        or "test_invariant[duplicate-resistance-" in line
        or "test_invariant[known-item-stability-reindex]" in line
    ]
    families = ["deletion-isolation", "duplicate-resistance", "known-item-stability"]
    assert len(mutating) > len(families), "some family holds several mutating cases"
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "-rA")
    skips = [
        line
        for line in result.stdout.lines
        if line.startswith("SKIPPED") and "MutableTarget" in line
    ]
    assert sorted(line.split(": ")[1] for line in skips) == families, skips
    outcomes = result.parseoutcomes()
    assert outcomes["deselected"] == len(mutating) - len(families), outcomes
    result.stdout.fnmatch_lines(
        ["searcheval: deletion-isolation: 1 case skipped and 2 not run (deselected): *"]
    )
    # Every other case ran, the non-mutating ones of a family with a mutating case too.
    ran = [c.id for c in cases(load(pytester.path)) if c.invariant == "known-item-stability"]
    assert any(f"PASSED collection.yaml::test_invariant[{c}]" in result.stdout.str() for c in ran)
