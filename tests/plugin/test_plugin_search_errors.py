"""A search that errors: counted once, by the gate's error rule, never a quality verdict."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import make_project, read_report

pytest_plugins = ["pytester"]

ARGS = ("--search-eval", "-p", "no:cacheprovider", "-rxXs")

#: The fake target of plugin_helpers, with one query whose search fails as an HTTP 503 does.
FAILING = """

from pytest_searcheval.targets import SearchFailed

_fake = fake


def fake(query, *, profile, limit, filters, extract):
    if os.environ.get("SEARCHEVAL_ERROR") == query:
        raise SearchFailed(
            "HTTP 503 Service Unavailable", url="http://search.test/?q=" + query, attempts=3
        )
    return _fake(query, profile=profile, limit=limit, filters=filters, extract=extract)
"""


def _project(pytester: pytest.Pytester) -> None:
    make_project(pytester, invariants=True)
    conftest = pytester.path / "conftest.py"
    text = conftest.read_text(encoding="utf-8")
    head, tail = text.split("\n@pytest.fixture", 1)
    conftest.write_text(head + FAILING + "\n@pytest.fixture" + tail, encoding="utf-8")


def test_a_rebaseline_is_refused_while_a_search_errors(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    monkeypatch.setenv("SEARCHEVAL_ERROR", "rain forecast city")
    result = pytester.runpytest(*ARGS, "--search-eval-update-baseline")
    result.stdout.fnmatch_lines(
        [
            "*[[]failed[]] baseline update: refused: search errors (hybrid 1 (q4); lexical 1 "
            "(q4); semantic 1 (q4); invariant cases * (*threshold-compliance-q4*)); a baseline "
            "is written from a run in which every search answered"
        ]
    )
    assert not (pytester.path / "baselines" / "baseline.json").exists()
    assert result.ret == 1


def test_a_case_the_target_could_not_answer_is_never_a_known_failure() -> None:
    from pytest_searcheval.baseline.ledger import make_ledger

    could_not = {
        "id": "threshold-compliance-q4",
        "invariant": "threshold-compliance",
        "status": "failed",
        "passed": False,
        "message": "threshold-compliance-q4: the target could not answer: HTTP 503",
        "details": {"unavailable": "HTTP 503"},
        "reasons": [],
    }
    failed = {**could_not, "id": "threshold-compliance-q3", "details": {}, "message": "over"}
    report = {"queries": {}, "invariants": {r["id"]: r for r in (could_not, failed)}}
    assert list(make_ledger(report)["invariants"]) == ["threshold-compliance-q3"]  # type: ignore[arg-type]


def test_a_search_error_counts_once_under_the_error_rule(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    pytester.runpytest(*ARGS, "--search-eval-update-baseline")  # every search answers
    monkeypatch.setenv("SEARCHEVAL_ERROR", "rain forecast city")
    result = pytester.runpytest(*ARGS, "--search-eval-max-errors=1")
    # The query test's error is the one failure; the invariant cases that searched q4 are
    # not judged (no regression, no known failure), and the gate tolerates one error.
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and "xfailed" not in outcomes
    result.stdout.fnmatch_lines(
        [
            "gate: PASSED",
            "*[[]passed[]] no search errors: errored queries: hybrid 1 (q4); lexical 1 (q4); "
            "semantic 1 (q4) (tolerance 1 per profile)",
            "*[[]passed[]] invariants not below baseline: * not judged (search errors)",
            "SKIPPED * threshold-compliance-q4: not judged: the target could not answer: "
            "HTTP 503 Service Unavailable (a search error: *",
        ]
    )
    assert "regression: this test passed in the baseline" not in result.stdout.str()
    report = read_report(pytester)
    case = report["invariants"]["threshold-compliance-q4"]
    assert case["status"] == "errored" and case["details"]["query"] == "rain forecast city"
    assert report["invariant_summary"]["invariants"]["threshold-compliance"]["errored"] == 1


def test_a_callable_targets_exception_is_one_line_in_an_invariant_case(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    conftest = pytester.path / "conftest.py"
    text = conftest.read_text(encoding="utf-8")
    conftest.write_text(
        text.replace(
            '    if os.environ.get("SEARCHEVAL_ERROR") == query:\n',
            '    if os.environ.get("SEARCHEVAL_RAISE") == query:\n'
            "        raise ConnectionError('connection reset')\n"
            '    if os.environ.get("SEARCHEVAL_ERROR") == query:\n',
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv("SEARCHEVAL_RAISE", "rain forecast city")
    result = pytester.runpytest(*ARGS, "-k", "threshold-compliance-q4")
    result.stdout.fnmatch_lines(
        [
            "SKIPPED * threshold-compliance-q4: not judged: the target could not answer: "
            "ConnectionError: connection reset (a search error: *"
        ]
    )
    assert "Traceback" not in result.stdout.str() and "def search" not in result.stdout.str()


def test_errored_queries_are_counted_and_the_gate_compares_the_same_queries(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester)
    ini = pytester.path / "tox.ini"
    ini.write_text(
        ini.read_text(encoding="utf-8").replace(
            "search_eval_gated_profile = hybrid", "search_eval_gated_profile = lexical"
        ),
        encoding="utf-8",
    )
    pytester.runpytest(*ARGS, "--search-eval-update-baseline")
    baseline = json.loads((pytester.path / "baselines" / "baseline.json").read_text())
    lexical = baseline["profiles"]["lexical"]
    answered = [v["nDCG@10"] for q, v in lexical["queries"].items() if q in ("q1", "q2")]
    monkeypatch.setenv("SEARCHEVAL_ERROR", "rain forecast city")
    result = pytester.runpytest(*ARGS, "--search-eval-max-errors=1")
    report = read_report(pytester)
    now = report["profiles"]["lexical"]["measures"]["nDCG@10"]["mean"]
    whole = lexical["aggregates"]["nDCG@10"]
    before = sum(answered) / len(answered)
    assert abs(before - whole) > 1e-3  # the errored query moves the baseline's mean
    result.stdout.fnmatch_lines(
        [
            "relevance measures over 2 of 4 queries (a judged document of grade >= 2); "
            "1 errored, not scored: q4; left out: 1 unanswerable *",
            f"*[[]passed[]] lexical nDCG@10 vs baseline: {now:.4f} vs baseline {before:.4f} "
            f"(*); on the queries that answered: 1 errored, not scored (q4), baseline over "
            f"every query {whole:.4f}",
        ]
    )
    assert any("errored and are not scored" in n for n in report["limitations"])


def test_a_search_errors_attempts_are_said_once() -> None:
    from pytest_searcheval.evaluation.scoring import search_error_reason

    http = {"error": "HTTP 503 from GET http://s/?q=x (3 attempts): busy", "attempts": 3}
    assert search_error_reason("default", http).text == (
        "search error on profile 'default': HTTP 503 from GET http://s/?q=x (3 attempts): busy"
    )
    raised = {"error": "ConnectionError: refused", "attempts": 1}
    assert search_error_reason("default", raised).text == (
        "search error on profile 'default' after 1 attempt: ConnectionError: refused"
    )


def test_a_hand_written_search_of_another_profile_names_the_template(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    pytester.makeconftest(
        "import httpx, pytest\n"
        "from pytest_searcheval.targets import HttpTarget\n"
        "def answer(request):\n"
        "    return httpx.Response(200, json={'results': [{'id': 'd1', 'score': 1.0}]})\n"
        "@pytest.fixture(scope='session')\n"
        "def searcheval_target():\n"
        "    target = HttpTarget('http://search.test/s?q={query}')\n"
        "    target._client = httpx.Client(transport=httpx.MockTransport(answer))\n"
        "    return target\n"
    )
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_hand="import pytest\n"
        "def test_default(searcheval):\n"
        "    assert list(searcheval.search('weather').ids) == ['d1']\n"
        "def test_other(searcheval):\n"
        "    with pytest.raises(ValueError, match='the URL template http://search.test/s\\\\?q="
        "\\\\{query\\\\} has no \\\\{profile\\\\} placeholder'):\n"
        "        searcheval.search('weather', profile='nope')\n"
    )
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "test_hand.py")
    result.assert_outcomes(passed=2)
