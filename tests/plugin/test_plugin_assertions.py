"""Hand-written search tests through pytester: the ``searcheval`` fixture, ranking snapshots,
assertion messages, and how these tests live among the others (selection, --lf, JUnit, xdist,
the report's section, the gate)."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import JUDGMENTS, make_project, read_report

from pytest_searcheval import metrics
from pytest_searcheval.evaluation import at_depth
from pytest_searcheval.settings import SearchEvalConfig

pytest_plugins = ["pytester"]

RUN = ("--search-eval", "-p", "no:cacheprovider")
#: the hand-written tests alone (the ini deselects the invariants with -m, which -m would replace)
HAND = ("-k", "not test_query and not test_invariant")
# The fake ranks by word overlap, ties by id: "weather forecast" -> d1, d5, d3 (lexical reversed).


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # A CI run fails on a snapshot never recorded; these runs record their first snapshots.
    for variable in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(variable, raising=False)


SEARCH = """
import pytest
from pytest_searcheval.targets import TargetUnavailable

def test_search(searcheval):
    r = searcheval.search("weather forecast", profile="hybrid", limit=2)
    assert r.ids == ("d1", "d5") and r.rank("d1") == 1 and r.rank("d3") is None
    assert r.scores == (10.0, 9.0) and r.profile == "hybrid" and r.limit == 2
    assert r.qid == "q1" and r.grade("d1") == 3 and r.title("d5") == "Rain forecast"
    assert searcheval.search("weather forecast", profile="lexical").top(1) == ["d3"]
    # the run's limit and gated profile by default
    d = searcheval.search("some weather")
    assert d.profile == "hybrid" and d.limit == 20 and d.qid is None

def test_filters_reach_the_target_and_the_oracle(searcheval):
    r = searcheval.search("stock prices", filters={"network": "stellar:testnet"})
    assert r.filters == {"network": "stellar:testnet"}
    assert r.applied_filters == {"network": "stellar:testnet"}
    assert r.violations and "d2" in r.violations[0]

def test_unavailable_profile(searcheval):
    with pytest.raises(TargetUnavailable, match="semantic index is not built"):
        searcheval.search("weather forecast", profile="semantic")

def test_unknown_golden_query(searcheval):
    with pytest.raises(LookupError, match="no golden query 'q99'"):
        searcheval.measure("q99")
"""


def _hand(pytester: pytest.Pytester, source: str, name: str = "test_hand") -> None:
    pytester.makepyfile(**{name: source})


def test_the_fixture_searches_the_configured_target(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    pytester.makeconftest(
        (pytester.path / "conftest.py")
        .read_text()
        .replace('if mode == "violate" and query == "stock prices":', "if filters:")
        .replace('applied = {"network": "stellar:testnet"}', "applied = dict(filters)")
    )
    monkeypatch.setenv("SEARCHEVAL_FAKE", "broken-semantic")
    _hand(pytester, SEARCH)
    result = pytester.runpytest(*RUN, "test_hand.py", *HAND)
    result.assert_outcomes(passed=4)


def test_without_the_evaluation_the_tests_skip_with_the_reason(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _hand(pytester, SEARCH)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rs", "test_hand.py")
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["*the search evaluation is off: run pytest with --search-eval*"])


MEASURE = """
import pytest
from pytest_searcheval.assertions import MeasureUndefined

def test_golden(searcheval):
    m = searcheval.measure("q1")
    print("MEASURES=" + json.dumps(dict(m)))
    print("ADHOC=" + json.dumps(dict(searcheval.measure("q1", ranking=["d3", "d5", "d1"]))))
    assert "1  d1  grade 3    Skyline weather forecast" in m.explain()
    assert "relevant (grade >= 2): d1 (3), d5 (2)" in m.explain() or m.conventions["trec_compat"]

@pytest.mark.searcheval_query("q4")
def test_marked(searcheval):
    assert searcheval.measure().qid == "q4"
    r = searcheval.search("rain forecast city")
    assert searcheval.measure(r)["RR@20"] == 1.0

def test_unanswerable(searcheval):
    m = searcheval.measure("q3")
    try:
        value = m["nDCG@10"]
    except MeasureUndefined as exc:
        value = str(exc)
    print("Q3=" + json.dumps(value))
""".replace("import pytest", "import json\nimport pytest", 1)


def _printed(output: str, key: str) -> object:
    line = next(x for x in output.splitlines() if f"{key}=" in x)
    return json.loads(line.split(f"{key}=", 1)[1])


@pytest.mark.parametrize("trec", [False, True])
def test_measure_uses_every_measure_and_the_run_conventions(
    pytester: pytest.Pytester, trec: bool
) -> None:
    make_project(pytester)
    _hand(pytester, MEASURE)
    args = [*RUN, "-s", "test_hand.py", *HAND] + (["--search-eval-trec-compat"] if trec else [])
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    qrels = {"q1": {d: g for q, d, g in JUDGMENTS if q == "q1"}}
    # every measure of the run, named as the report names them (cut at the run's limit, 20)
    names = [at_depth(m, 20) for m in SearchEvalConfig().measures]
    level = 1 if trec else 2
    for key, ids in (("MEASURES", ["d1", "d5", "d3"]), ("ADHOC", ["d3", "d5", "d1"])):
        expected = metrics.evaluate(
            qrels, {"q1": ids}, names, relevance_level=level, trec_compat=trec, max_grade=3
        )["q1"]
        printed = _printed(out, key)
        assert isinstance(printed, dict) and list(printed) == names
        assert printed == pytest.approx(expected), key
    # q3's only judgment is a 0: no value by default, trec_eval's 0.0 in trec-compat mode
    q3 = _printed(out, "Q3")
    if trec:
        assert q3 == 0.0
    else:
        assert isinstance(q3, str) and "scored by no-result accuracy" in q3


def test_a_search_slower_than_the_timeout_is_unavailable(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "slow")
    _hand(
        pytester,
        "def test_slow(searcheval):\n    searcheval.search('weather forecast')\n",
    )
    result = pytester.runpytest(*RUN, "test_hand.py", *HAND, "--search-eval-timeout", "0.0001")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TargetUnavailable: profile 'hybrid': 'weather forecast' took*"])


# --- ranking snapshots ------------------------------------------------------------------------

SNAPSHOT = """
import os

def test_rankings(searcheval, ranking_snapshot):
    tolerance = {k: float(v) if "." in v else int(v)
                 for k, v in (p.split("=") for p in os.environ.get("TOL", "").split(",") if p)}
    for q in ["weather forecast", "stock prices"]:
        ranking_snapshot.check(searcheval.search(q), **tolerance)
"""
SNAPFILE = "__rankings__/test_snap/test_rankings.yaml"


def test_snapshot_records_then_compares_and_fails_with_a_diff(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    _hand(pytester, SNAPSHOT, "test_snap")
    args = (*RUN, "test_snap.py", *HAND)
    first = pytester.runpytest(*args)
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines([f"searcheval: recorded ranking snapshot {SNAPFILE}"])
    path = pytester.path / SNAPFILE
    recorded = path.read_text()
    assert '"weather forecast":\n  query: "weather forecast"\n  profile: "hybrid"\n' in recorded
    assert '    - "d1"  # Skyline weather forecast\n    - "d5"  # Rain forecast\n' in recorded

    again = pytester.runpytest(*args)
    again.assert_outcomes(passed=1)
    assert "recorded ranking snapshot" not in again.stdout.str()
    assert path.read_text() == recorded

    # "worse" drops d1 from the answer to "weather forecast": d5, d3 instead of d1, d5, d3.
    monkeypatch.setenv("SEARCHEVAL_FAKE", "worse")
    broken = pytester.runpytest(*args)
    broken.assert_outcomes(failed=1)
    broken.stdout.fnmatch_lines(
        [
            f"*ranking snapshot 'weather forecast' in {SNAPFILE} is not within tolerance "
            "(equal rankings)*",
            "*- the ranking changed*",
            "*rank  recorded * now",
            "*1  d1 [[]grade 3] Skyline weather forecast * d5 [[]grade 2] Rain forecast  (was 2)",
            "*2  d5 [[]grade 2] Rain forecast * d3 [[]grade 1] Almanac weather history  (was 3)",
            "*3  d3 [[]grade 1] Almanac weather history*",
            "*no longer returned: d1",
            "*re-record with --search-eval-snapshot-update",
        ]
    )
    assert path.read_text() == recorded  # a failing comparison writes nothing

    # Tolerances: the same documents' order is what moved, not only the set.
    monkeypatch.setenv("TOL", "top_k=1")
    pytester.runpytest(*args).assert_outcomes(failed=1)
    monkeypatch.setenv("TOL", "max_rank_shift=1")
    res = pytester.runpytest(*args)
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*d1 (recorded at rank 1) is no longer returned*"])
    monkeypatch.setenv("TOL", "min_rbo=0.3")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    monkeypatch.setenv("TOL", "min_rbo=0.9")
    res = pytester.runpytest(*args)
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*rank-biased overlap 0.* < min_rbo 0.9 (p 0.9)*"])

    # The explicit update flag re-records, and the next run compares with the new ranking.
    monkeypatch.delenv("TOL")
    update = pytester.runpytest(*args, "--search-eval-snapshot-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines([f"searcheval: recorded ranking snapshot {SNAPFILE}"])
    assert '"weather forecast":' in path.read_text() and '- "d1"' not in path.read_text()
    pytester.runpytest(*args).assert_outcomes(passed=1)


def test_an_unreadable_snapshot_names_its_file(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    _hand(pytester, SNAPSHOT, "test_snap")
    path = pytester.path / SNAPFILE
    path.parent.mkdir(parents=True)
    path.write_text('"weather forecast": {ranking: d1}\n')
    result = pytester.runpytest(*RUN, "test_snap.py", *HAND)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*SnapshotError: *test_rankings.yaml: snapshot 'weather forecast', field 'ranking'*"]
    )


# --- assertion messages -----------------------------------------------------------------------

MESSAGES = """
from pytest_searcheval.assertions import assert_rank

def test_rank(searcheval):
    r = searcheval.search("weather forecast")
    assert r.rank("d5") == 1

def test_top(searcheval):
    assert "d1" not in searcheval.search("weather forecast").top(2)

def test_helper(searcheval):
    assert_rank(searcheval.search("rain forecast city"), "d1", at_most=1)

def test_absent(searcheval):
    r = searcheval.search("weather forecast", limit=1)
    assert r.rank("d5") is not None
"""


def test_assertion_messages_show_the_ranking_grades_and_baseline(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    pytester.runpytest("--search-eval-update-baseline", "-p", "no:cacheprovider")
    _hand(pytester, MESSAGES)
    # A subprocess: the helpers module must be imported fresh, after the rewrite hook knows it.
    result = pytester.runpytest_subprocess(*RUN, "test_hand.py", *HAND)
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        [
            "*def test_rank*",
            "E       AssertionError: assert 2 == 1",
            "E         'd5' is at rank 2",
            "E         ranking of 'weather forecast' (profile hybrid, golden query q1, 3 *",
            "E             1  d1  grade 3    Skyline weather forecast",
            "E         ->  2  d5  grade 2    Rain forecast",
            "E             3  d3  grade 1    Almanac weather history",
            "E         baseline ranking (searcheval-*):",
            "E             1  d1  grade 3    Skyline weather forecast",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*def test_top*",
            "E       AssertionError: assert 'd1' not in the top 2",
            "E         'd1' is at rank 1",
        ]
    )
    # The helper's own assert is rewritten: its explanation, not a bare AssertionError.
    result.stdout.fnmatch_lines(
        [
            "*def test_helper*",
            "E       AssertionError: assert 2 <= 1",
            "E         'd1' is at rank 2",
            "E         ->  2  d1  grade 1    Skyline weather forecast",
        ]
    )
    # A message shown whole gets no section; an id that was not returned has no rank to
    # explain, so the report shows the ranking.
    rank_failure = result.stdout.str().split("_ test_rank _")[1].split("_ test_top _")[0]
    assert "rankings this test searched" not in rank_failure
    # An id that was not returned has no rank to explain: the report shows the ranking.
    result.stdout.fnmatch_lines(
        [
            "*def test_absent*",
            "*searcheval: rankings this test searched*",
            "ranking of 'weather forecast' (profile hybrid, golden query q1, 1 returned):",
        ]
    )


# --- ordinary tests among the others ----------------------------------------------------------

ORDINARY = """
import os
import pytest

def test_paris(searcheval):
    assert searcheval.search("weather forecast").rank("d1") == 1

def test_stocks(searcheval):
    top = searcheval.search("stock prices").top(1)
    assert top == ["d4" if os.environ.get("STOCKS") else "d2"]

@pytest.mark.searcheval_gated
def test_gated_rain(searcheval):
    assert searcheval.search("rain forecast city").rank("d5") == int(os.environ.get("RAIN", "1"))
"""


def test_selection_last_failed_and_junit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    _hand(pytester, ORDINARY)
    monkeypatch.setenv("STOCKS", "1")
    result = pytester.runpytest("--search-eval", "-k", "paris or stocks", "--junitxml=out.xml")
    result.assert_outcomes(passed=1, failed=1)
    xml = (pytester.path / "out.xml").read_text()
    assert 'name="test_paris"' in xml and 'name="test_stocks"' in xml
    assert "ranking of &apos;stock prices&apos;" in xml or "ranking of 'stock prices'" in xml
    rerun = pytester.runpytest("--search-eval", "--lf")
    rerun.assert_outcomes(failed=1)
    rerun.stdout.fnmatch_lines(["*test_hand.py::test_stocks*"])
    assert (
        "test_paris" not in rerun.stdout.str().split("short test summary")[0].split("FAILURES")[-1]
    )


def test_outcomes_reach_the_report_and_only_gated_ones_the_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    _hand(pytester, ORDINARY)
    monkeypatch.setenv("STOCKS", "1")
    result = pytester.runpytest(*RUN)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = read_report(pytester)
    hand = report["hand_written"]
    assert {n: e["outcome"] for n, e in hand["tests"].items()} == {
        "test_hand.py::test_gated_rain": "passed",
        "test_hand.py::test_paris": "passed",
        "test_hand.py::test_stocks": "failed",
    }
    assert hand["tests"]["test_hand.py::test_gated_rain"]["gated"] is True
    assert hand["tests"]["test_hand.py::test_stocks"]["queries"] == ["q2"]
    assert report["gate"]["passed"] is True  # an ungated failure leaves the gate alone
    rules = {r["name"]: r for r in report["gate"]["rules"]}
    assert rules["hand-written gated tests pass"]["status"] == "passed"
    result.stdout.fnmatch_lines(
        [
            "hand-written search tests: 1 failed, 2 passed (1 gated)",
            "  failed: test_hand.py::test_stocks",
            "gate: PASSED",
        ]
    )
    assert (
        "Hand-written search tests: 1 failed, 2 passed"
        in (pytester.path / "searcheval-report" / "report.md").read_text()
    )
    page = (pytester.path / "searcheval-report" / "report.html").read_text()
    assert "Hand-written search tests (1 failed, 2 passed)" in page
    assert "<td><code>test_hand.py::test_stocks</code></td><td>failed</td><td>no</td>" in page

    monkeypatch.delenv("STOCKS")
    monkeypatch.setenv("RAIN", "2")
    result = pytester.runpytest(*RUN)
    report = read_report(pytester)
    rules = {r["name"]: r for r in report["gate"]["rules"]}
    assert report["gate"]["passed"] is False
    assert rules["hand-written gated tests pass"] == {
        "name": "hand-written gated tests pass",
        "status": "failed",
        "detail": "1 of 1 did not pass: test_hand.py::test_gated_rain",
    }

    # Without a gated test the gate has no such rule.
    pytester.makepyfile(test_hand=ORDINARY.replace("@pytest.mark.searcheval_gated\n", ""))
    pytester.runpytest(*RUN)
    names = [r["name"] for r in read_report(pytester)["gate"]["rules"]]
    assert "hand-written gated tests pass" not in names


@pytest.mark.slow  # xdist workers are processes
def test_under_xdist_the_section_is_the_serial_one(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    _hand(pytester, ORDINARY)
    _hand(pytester, SNAPSHOT, "test_snap")
    monkeypatch.setenv("STOCKS", "1")
    serial = pytester.runpytest_subprocess(*RUN, "-p", "xdist", "-n", "0")
    first = read_report(pytester)["hand_written"]
    (pytester.path / SNAPFILE).unlink()
    xdist = pytester.runpytest_subprocess(*RUN, "-n", "2")
    assert serial.ret == xdist.ret == pytest.ExitCode.TESTS_FAILED
    report = read_report(pytester)
    assert report["run"]["xdist_workers"] == 2
    assert report["hand_written"] == first
    assert first["tests"]["test_snap.py::test_rankings"]["snapshots_recorded"] == [SNAPFILE]
    xdist.stdout.fnmatch_lines([f"searcheval: recorded ranking snapshot {SNAPFILE}"])


# --- a run-file target ---------------------------------------------------------------------

RUN_TOPICS = "1\tred apples\n2\tgreen pears\n3\tyellow figs\n4\tyellow figs\n"
RUN_FILE = "1 Q0 d3 1 9.0 bm25\n1 Q0 d1 2 8.0 bm25\n1 Q0 d2 3 7.0 bm25\n2 Q0 d2 1 1.0 bm25\n"
RUN_HAND = """
import pytest
from pytest_searcheval.targets import TargetUnavailable

def test_topic_text(searcheval):
    r = searcheval.search("Red  APPLES")
    assert r.qid == "1" and r.ids == ("d3", "d1", "d2") and r.profile == "bm25"
    assert r.query == "Red  APPLES" and r.scores == (9.0, 8.0, 7.0)
    assert searcheval.query("1").ids == r.ids
    assert searcheval.measure(r)["RR"] == 0.5

def test_a_limit_cuts_the_whole_ranking(searcheval):
    r = searcheval.search("red apples", limit=2)
    assert r.ids == ("d3", "d1") and r.limit == 2

def test_other_text(searcheval):
    with pytest.raises(TargetUnavailable) as info:
        searcheval.search("purple plums")
    print("OTHER=" + str(info.value))

def test_shared_text(searcheval):
    with pytest.raises(TargetUnavailable) as info:
        searcheval.search("yellow figs")
    print("SHARED=" + str(info.value))

def test_filters(searcheval):
    with pytest.raises(TargetUnavailable) as info:
        searcheval.search("green pears", filters={"network": "x"})
    print("FILTERS=" + str(info.value))
"""


def test_a_run_file_answers_its_topics_texts_and_names_query_for_the_rest(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "qrels.txt").write_text("1 0 d1 2\n2 0 d2 1\n3 0 d1 1\n4 0 d1 1\n")
    (pytester.path / "topics.tsv").write_text(RUN_TOPICS)
    (pytester.path / "bm25.run").write_text(RUN_FILE)
    pytester.makeini(
        "[pytest]\nsearch_eval_qrels = qrels.txt\nsearch_eval_topics = topics.tsv\n"
        "search_eval_run = bm25.run\n"
    )
    _hand(pytester, RUN_HAND)
    result = pytester.runpytest(*RUN, "-s", "test_hand.py")
    result.assert_outcomes(passed=5)
    out = result.stdout.str()
    head = (
        "profile 'bm25': a run file (--search-eval-run) holds a fixed ranking for each of the "
        "collection's queries and searches nothing else: "
    )
    assert _line(out, "OTHER") == head + (
        "'purple plums' is not the text of one of them; use searcheval.query('<id>') with a "
        "query id, or search the text of a query as the collection gives it"
    )
    assert _line(out, "SHARED") == head + (
        "'yellow figs' is the text of several queries (3, 4); name one: searcheval.query('3')"
    )
    assert _line(out, "FILTERS") == head + (
        "it cannot apply filters to the ranking of '2'; search without filters=, or use "
        "searcheval.query('2')"
    )


def _line(output: str, key: str) -> str:
    line = next(x for x in output.splitlines() if f"{key}=" in x)
    return line.split(f"{key}=", 1)[1]
