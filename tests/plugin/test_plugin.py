"""The plugin end to end, with pytester projects: a tiny collection and an in-memory target."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from plugin_helpers import make_project, read_report

pytest_plugins = ["pytester"]

HEAVY = ("numpy", "psycopg", "torch", "sentence_transformers", "matplotlib", "httpx")


@pytest.mark.parametrize("args", [["--help"], ["-q", "--co"]])
def test_without_search_eval_nothing_heavy_is_imported(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    # Other installed plugins are disabled: pytest-postgresql imports psycopg by itself.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(
        "import sys\n"
        "def pytest_unconfigure(config):\n"
        f"    heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "    print('HEAVY=' + ','.join(heavy))\n"
    )
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "pytest_searcheval.plugin", *args)
    result.stdout.fnmatch_lines(["HEAVY="])
    assert "--search-eval-collection" in result.stdout.str() or args != ["--help"]
    assert "test_query" not in result.stdout.str()


def test_passing_run_writes_every_report(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest("--search-eval", "-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*collection.yaml::test_query[[]q1-exact-name[]] PASSED*",
            "*collection.yaml::test_query[[]q3-no-result[]] PASSED*",
            "*search evaluation*",
            "*gate: PASSED*",
            "*[[]passed[]] hard filters respected: 0 violations in * returned results*",
            "searcheval: wrote searcheval-report/report.json",
            "searcheval: wrote searcheval-report/report.md",
            "searcheval: wrote searcheval-report/report.html",
        ]
    )
    report = read_report(pytester)
    assert report["schema_version"] == 1
    assert report["run"]["queries_run"] == 4  # the dev query q5 is not in the test split
    assert set(report["queries"]) == {"q1", "q2", "q3", "q4"}
    hybrid = report["profiles"]["hybrid"]
    assert hybrid["available"] and hybrid["hard_filter_violations"] == 0
    ndcg = hybrid["measures"]["nDCG@10"]
    assert ndcg["low"] <= ndcg["mean"] <= ndcg["high"] and ndcg["n"] == 3
    assert hybrid["no_result"]["accuracy"] == 1.0
    assert report["collection"]["hashes"]["corpus"].startswith("sha256:")
    assert report["metric_manifest"]["relevance_level"] == 2
    assert {c["measure"] for c in report["comparisons"]} == {"nDCG@10", "R@20"}
    assert all(0.0 <= c["p_holm"] <= 1.0 for c in report["comparisons"])
    assert any("synthetic" in note for note in report["limitations"])
    html = (pytester.path / "searcheval-report" / "report.html").read_text()
    assert html.count("<figure><svg") >= 2  # the classes and the latency (no baseline here)
    assert "src='http" not in html and "<script src" not in html  # inline only


def test_unanswerable_query_with_results_fails_with_triage_message(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "stuff")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*query q3 [[]no-result[]] 'unicorn rentals' (split test, profile hybrid)",
            "*unanswerable query returned 1 results (expected none)",
            "*1  d2  unjudged   Ticker stock quotes",
            '*expected: {"no_result": true}*',
        ]
    )
    # No Python traceback: the message is the whole report.
    assert "plugin_items.py" not in result.stdout.str()
    assert read_report(pytester)["profiles"]["hybrid"]["no_result"]["accuracy"] == 0.0


def test_hard_filter_violation_is_found_by_the_oracle(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "violate")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2)  # and test_gate: the gate fails
    result.stdout.fnmatch_lines(
        [
            "*hard-filter violation at rank 1: d2: *stellar:pubnet*",
            '*applied filters: {"network": "stellar:testnet"}',
            "gate: FAILED",
            "*[[]failed[]] hard filters respected: 6 violations in * results *: lexical 2, *",
        ]
    )
    assert result.ret == 1


def test_unavailable_profile_is_reported_never_zero(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "broken-semantic")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["unavailable: semantic: semantic index is not built"])
    report = read_report(pytester)
    semantic = report["profiles"]["semantic"]
    assert semantic == {"available": False, "reason": "semantic index is not built"}
    assert report["unavailable"] == {"semantic": "semantic index is not built"}
    assert all("semantic" not in q["profiles"] for q in report["queries"].values())


def test_a_search_that_raises_is_each_querys_error_not_the_profiles(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester, ini="search_eval_gated_profile = semantic\n")
    pytester.makeconftest(
        "import pytest\n"
        "from pytest_searcheval.targets import CallableTarget\n"
        "def boom(query, **kw):\n"
        "    raise ConnectionError('connection refused')\n"
        "@pytest.fixture(scope='session')\n"
        "def searcheval_target():\n"
        "    return CallableTarget(boom)\n"
    )
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=5)  # and test_gate: the gate fails
    result.stdout.fnmatch_lines(
        [
            "*search error on profile 'semantic' after 1 attempt: "
            "ConnectionError: connection refused",
            "*[[]failed[]] no search errors: errored queries: hybrid 4 (q1, q2, q3, q4); "
            "lexical 4 (*); semantic 4 (q1, q2, q3, q4) (tolerance 0 per profile)",
        ]
    )
    report = read_report(pytester)
    assert report["unavailable"] == {}
    refused = {"error": "ConnectionError: connection refused", "url": None, "attempts": 1}
    assert report["queries"]["q2"]["errors"] == dict.fromkeys(
        ("lexical", "semantic", "hybrid"), refused
    )


def test_a_service_that_does_not_answer_stops_the_run_with_one_error(
    pytester: pytest.Pytester,
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    make_project(pytester)
    pytester.makeconftest("")
    result = pytester.runpytest(
        "--search-eval",
        f"--search-eval-url=http://127.0.0.1:{port}",
        "--search-eval-retries=1",
        "--search-eval-retry-backoff=0",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert out.count("the target does not answer") == 1, out
    result.stdout.fnmatch_lines(
        [f"*searcheval: the target does not answer: *(GET http://127.0.0.1:{port}/, 2 attempts)*"]
    )
    assert "failed" not in result.parseoutcomes()


def test_selection_by_k_and_node_id(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "-k", "paraphrase")
    result.assert_outcomes(passed=2)
    assert "test_query[q1-exact-name]" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*[[]skipped[]] hybrid >= lexical on nDCG@10: partial run*"])
    result = pytester.runpytest(
        "--search-eval", "-p", "no:cacheprovider", "collection.yaml::test_query[q2-paraphrase]"
    )
    result.assert_outcomes(passed=1)
    # A partial run writes beside the full report, never over it.
    assert not (pytester.path / "searcheval-report" / "report.json").exists()
    partial = json.loads((pytester.path / "searcheval-report" / "report-partial.json").read_text())
    assert partial["run"]["queries_run"] == 1 and partial["run"]["partial"]


def test_split_and_ini_precedence(pytester: pytest.Pytester) -> None:
    make_project(pytester, ini="search_eval_split = dev\n")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "--co", "-q")
    result.stdout.fnmatch_lines(["collection.yaml::test_query[[]q5-exact-name[]]"])
    result = pytester.runpytest(
        "--search-eval", "-p", "no:cacheprovider", "--co", "-q", "--search-eval-split", "all"
    )
    result.stdout.fnmatch_lines(["*collection.yaml::test_query[[]q5-exact-name[]]", "5*collected*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--search-eval-gain", "log"],
            "--search-eval-gain: expected one of exp, linear, got 'log'",
        ),
        (["--search-eval-limit", "x"], "--search-eval-limit: expected an integer, got 'x'"),
        (
            ["--search-eval-gated-profile", "bm25"],
            "--search-eval-gated-profile: 'bm25' is not among the profiles*",
        ),
        (
            ["--search-eval-measures=nDCG@10,ndcg@5"],
            "--search-eval-measures: expected known measures (measure 'ndcg@5': unknown *), "
            "got 'ndcg@5'",
        ),
        (
            ["--search-eval-url", "http://127.0.0.1:9/s?q={query}"],
            "ini search_eval_profiles: profile 'lexical': the URL template "
            "http://127.0.0.1:9/s?q={query} has no {profile} placeholder, so it serves one "
            "profile, 'default'*",
        ),
        (
            ["--search-eval-latency-budgets", "hybrid_rerank=fast"],
            "--search-eval-latency-budgets: expected PROFILE=P95 or PROFILE=P95/P99 "
            "(finite milliseconds >= 0; '-' keeps the default), got 'hybrid_rerank=fast'",
        ),
        (
            ["--search-eval-latency-profiles=hybrid", "--search-eval-latency-budgets=hybrid=inf"],
            "--search-eval-latency-budgets: expected PROFILE=P95 or PROFILE=P95/P99 "
            "(finite milliseconds >= 0; '-' keeps the default), got 'hybrid=inf'",
        ),
        (
            ["--search-eval-latency-p95-ms=inf"],
            "--search-eval-latency-p95-ms: expected a finite number >= 0, got 'inf'",
        ),
        (
            [
                "--search-eval-latency-profiles=hybrid",
                "--search-eval-latency-budgets=hybrid=50/300,hybrid=80",
            ],
            "--search-eval-latency-budgets: expected each profile once ('hybrid' is named "
            "twice), got 'hybrid=80'",
        ),
        (
            [
                "--search-eval-latency-profiles=hybrid",
                "--search-eval-latency-budgets=hybrid=50,hybrid_rerank=250/400",
            ],
            "--search-eval-latency-budgets: 'hybrid_rerank' is not timed; the latency tests "
            "time hybrid (add it to search_eval_latency_profiles)",
        ),
    ],
)
def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    make_project(pytester)
    result = pytester.runpytest("--search-eval", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message}*"])


def test_a_per_profile_latency_budget_needs_the_timed_profiles_named(
    pytester: pytest.Pytester,
) -> None:
    # Without latency_profiles or gated_profile, the profile timed is the target's first, known
    # only at run time: a budget naming another would never be checked.
    make_project(pytester, ini="# search_eval_gated_profile unset\n")
    result = pytester.runpytest("--search-eval", "--search-eval-latency-budgets=hybrid=50")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--search-eval-latency-budgets: a per-profile budget needs the timed profiles "
            "named: set search_eval_latency_profiles (or search_eval_gated_profile)*"
        ]
    )


def test_missing_collection_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--search-eval")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*no collection here (no collection.yaml, nor BEIR's corpus.jsonl and queries.jsonl)*"]
    )
    result.stderr.fnmatch_lines(["*pass --search-eval-collection=DIR*"])


def test_a_beir_layout_at_the_rootdir_is_the_collection(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".jsonl",
        corpus='{"_id": "d1", "title": "Tide tables", "text": "High and low water."}\n'
        '{"_id": "d2", "title": "Star charts", "text": "Constellations by month."}\n',
        queries='{"_id": "q1", "text": "tide tables"}\n',
    )
    pytester.mkdir("qrels")
    (pytester.path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    pytester.makeconftest(
        "import pytest\n"
        "from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse\n"
        "@pytest.fixture(scope='session')\n"
        "def searcheval_target():\n"
        "    return CallableTarget(lambda q, **kw: SearchResponse(hits=(Hit('d1', 1.0),)))\n"
    )
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*collection*split=test queries=1/1*"])
    # A corpus/ directory makes it a native layout to the loader: not taken for BEIR.
    pytester.mkdir("corpus")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_baseline_update_then_regression_fails_per_query_and_in_the_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    result = pytester.runpytest(
        "--search-eval", "--search-eval-update-baseline", "-p", "no:cacheprovider"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*[[]passed[]] baseline update: rewrote*git tag searcheval-tiny-*"]
    )
    baseline = json.loads((pytester.path / "baselines" / "baseline.json").read_text())
    assert re.fullmatch(r"searcheval-tiny-[0-9a-f]{12}", baseline["tag"])
    assert baseline["profiles"]["hybrid"]["queries"]["q1"]["ids"][0] == "d1"
    assert baseline["collection"]["hashes"]["judgments"].startswith("sha256:")
    again = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    assert again.ret == 0
    again.stdout.fnmatch_lines(["*[[]passed[]] hybrid nDCG@10 vs baseline: *change +0.0000)"])

    monkeypatch.setenv("SEARCHEVAL_FAKE", "worse")
    worse = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(
        [
            "*known item 'd1' expected at rank <= 1, found not in the top 2",
            "*nDCG@10 dropped to * from baseline 1.0000 (per-query tolerance 0.2)",
            "*baseline (searcheval-tiny-*): *nDCG@10 1.0000*",
            "*1  d1  grade 3    Skyline weather forecast",
            "*[[]failed[]] hybrid nDCG@10 vs baseline: * vs baseline * (floor *",
        ]
    )


def test_collection_change_without_rebaseline_fails(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.runpytest("--search-eval", "--search-eval-update-baseline", "-p", "no:cacheprovider")
    judgments = pytester.path / "qrels" / "judgments.tsv"
    judgments.write_text(judgments.read_text() + "q2\td1\t0\n")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*[[]failed[]] dataset and model unchanged: judgments sha256:* -> sha256:*"]
    )


def _git(cwd: object, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def test_baseline_tamper_check_against_its_tag(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.runpytest(
        "--search-eval",
        "--search-eval-update-baseline",
        "--search-eval-baseline-tag",
        "eval-v1",
        "-p",
        "no:cacheprovider",
    )
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*[[]unverified[]] baseline matches its git tag: *not in a git*"])
    assert result.ret == 0
    strict = pytester.runpytest(
        "--search-eval", "--search-eval-strict-baseline", "-p", "no:cacheprovider"
    )
    assert strict.ret == 1

    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "baselines/baseline.json")
    _git(pytester.path, "commit", "-q", "-m", "baseline")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*[[]unverified[]] baseline matches its git tag: tag eval-v1 not*"]
    )
    _git(pytester.path, "tag", "eval-v1")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*[[]passed[]] baseline matches its git tag: *equals the copy*"])
    assert result.ret == 0

    path = pytester.path / "baselines" / "baseline.json"
    data = json.loads(path.read_text())
    data["profiles"]["hybrid"]["aggregates"]["nDCG@10"] = 0.1  # lowering the bar
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*[[]failed[]] baseline matches its git tag: *differs from the copy at tag eval-v1*"]
    )

    # Naming a tag that does not exist, or none, hides no edit where the baseline was tagged.
    for renamed in ("eval-v2", None):
        path.write_text(json.dumps({**data, "tag": renamed}, indent=2, sort_keys=True) + "\n")
        result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
        assert result.ret == 1
        result.stdout.fnmatch_lines(
            [
                "*[[]failed[]] baseline matches its git tag: * though tag eval-v1 holds a copy "
                "of baselines/baseline.json: tag the commit *"
            ]
        )


def test_a_missing_tag_fails_where_the_repository_has_searcheval_tags(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    pytester.runpytest("--search-eval", "--search-eval-update-baseline", "-p", "no:cacheprovider")
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "collection.yaml")
    _git(pytester.path, "commit", "-q", "-m", "collection")
    # a clone with no baseline tag fetched cannot check: unverified, the gate passes
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["*[[]unverified[]] baseline matches its git tag: tag * not found*"]
    )
    assert result.ret == 0
    _git(pytester.path, "tag", "searcheval-tiny-older")
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "*[[]failed[]] baseline matches its git tag: tag searcheval-tiny-* not found in *, "
            "though the repository has searcheval tags (searcheval-tiny-older): *"
        ]
    )
    assert result.ret == 1


def test_step_summary_is_appended(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    summary = pytester.path / "summary.md"
    summary.write_text("previous step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    text = summary.read_text()
    assert text.startswith("previous step\n")
    assert "## Search evaluation: tiny (test split, 4 queries)" in text
    assert "| hybrid |" in text


@pytest.mark.slow  # a fresh interpreter
def test_help_lists_options_subprocess() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for option in ("--search-eval ", "--search-eval-url", "--search-eval-update-baseline"):
        assert option in out
    assert "search_eval_tolerance" in out


def test_invariant_cases_become_tests_and_reach_the_report(pytester: pytest.Pytester) -> None:
    from pytest_searcheval import invariants
    from pytest_searcheval.collection import load
    from pytest_searcheval.settings import SearchEvalConfig

    make_project(pytester, invariants=True)
    expected = {c.id for c in invariants.cases(load(pytester.path), SearchEvalConfig(split="test"))}
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "-v")
    for case_id in sorted(expected)[:3]:
        result.stdout.fnmatch_lines([f"*collection.yaml::test_invariant[[]{case_id}[]] *"])
    report = read_report(pytester)
    assert set(report["invariants"]) == expected
    assert all(
        v["status"] in ("passed", "failed", "skipped") for v in report["invariants"].values()
    )
    result.stdout.fnmatch_lines(["*] invariants not below baseline: *"])
    summary = report["invariant_summary"]
    assert sum(r["cases"] for r in summary["invariants"].values()) == len(expected)
    result.stdout.fnmatch_lines(["invariants:", "invariant * cases * passed * failed * skipped"])
    if summary["conformance"] is not None:
        result.stdout.fnmatch_lines(["filter conformance: * cases, * violations*"])
    out = pytester.path / "searcheval-report"
    assert "| invariant | cases | passed | failed | skipped |" in (out / "report.md").read_text()
    assert "<h2>Invariants</h2>" in (out / "report.html").read_text()


def test_relevance_measures_share_one_evaluated_query_set(pytester: pytest.Pytester) -> None:
    # q4's only judgment at the relevance level becomes grade 1: nDCG alone could still score
    # it (its ideal ranking accepts grade 1), but it must leave every relevance aggregate.
    make_project(pytester)
    judgments = pytester.path / "qrels" / "judgments.tsv"
    judgments.write_text(judgments.read_text().replace("q4\td5\t3", "q4\td5\t1"))
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "relevance measures over 2 of 4 queries (a judged document of grade >= 2); left out: "
            "1 unanswerable (scored by no-result accuracy); 1 with no document of grade >= 2: q4"
        ]
    )
    report = read_report(pytester)
    for profile in ("lexical", "semantic", "hybrid"):
        entry = report["profiles"][profile]
        assert entry["evaluated"] == 2
        assert {m: c["n"] for m, c in entry["measures"].items()} == dict.fromkeys(
            report["run"]["measures"], 2
        )
        assert report["classes"][profile]["paraphrase"]["evaluated"] == 1
        assert report["classes"][profile]["paraphrase"]["nDCG@10"]["n"] == 1
        assert report["classes"][profile]["no-result"]["nDCG@10"]["n"] == 0
    assert report["queries"]["q4"]["profiles"]["hybrid"]["measures"] == {}
    assert all(c["n"] == 2 for c in report["comparisons"])
    assert "grade >= the relevance level (2)" in report["metric_manifest"]["evaluated_queries"]
    assert any("2 of 4 queries enter the relevance measures" in n for n in report["limitations"])
    # A lower relevance level brings q4 back, for every measure at once.
    result = pytester.runpytest(
        "--search-eval", "-p", "no:cacheprovider", "--search-eval-relevance-level=1"
    )
    report = read_report(pytester)
    assert {c["n"] for c in report["profiles"]["hybrid"]["measures"].values()} == {3}


def test_every_setting_is_declared_once_and_documented() -> None:
    import dataclasses
    from pathlib import Path

    from pytest_searcheval.invariants.base import InvariantSettings
    from pytest_searcheval.settings import all_declared, markdown_table

    names = {d.name for d in all_declared()}
    fields = {f.name for f in dataclasses.fields(InvariantSettings)}
    # The invariants' profile, split and limit follow gated_profile, split and limit.
    assert {"invariant_" + f for f in fields - {"profile", "split", "limit"}} <= names
    docs = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    assert markdown_table() in docs.read_text(encoding="utf-8"), (
        "docs/configuration.md: regenerate the table with python -m pytest_searcheval.settings"
    )


def test_invariant_settings_from_ini_and_command_line(pytester: pytest.Pytester) -> None:
    make_project(
        pytester,
        invariants=True,
        ini="search_eval_invariant_enabled = threshold-compliance,known-item-stability\n"
        "search_eval_invariant_known_item_max_rank = 3\n",
    )
    result = pytester.runpytest("--search-eval", "-p", "no:cacheprovider", "--co", "-q")
    ids = [line for line in result.stdout.lines if "test_invariant[" in line]
    assert ids and all("threshold-compliance-" in i or "known-item-stability-" in i for i in ids), (
        ids
    )
    result = pytester.runpytest(
        "--search-eval",
        "-p",
        "no:cacheprovider",
        "--co",
        "-q",
        "--search-eval-invariant-enabled=paraphrase-churn",
    )
    assert not [line for line in result.stdout.lines if "threshold-compliance-" in line]
    bad = pytester.runpytest("--search-eval", "--search-eval-invariant-churn-rbo-p=1.5")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        ["*--search-eval-invariant-churn-rbo-p: invariant settings: churn_rbo_p: expected*"]
    )
    bad = pytester.runpytest("--search-eval", "--search-eval-invariant-churn-k=many")
    bad.stderr.fnmatch_lines(["*--search-eval-invariant-churn-k: expected an integer, got 'many'*"])


def test_last_failed_reruns_only_the_failed_query(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester)
    monkeypatch.setenv("SEARCHEVAL_FAKE", "worse")
    pytester.runpytest_subprocess("--search-eval").assert_outcomes(passed=3, failed=1)
    again = pytester.runpytest_subprocess("--search-eval", "--lf")
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure*"])
    # A rerun of one test is partial: it writes beside the full report.
    assert (pytester.path / "searcheval-report" / "report.json").is_file()
    assert (pytester.path / "searcheval-report" / "report-partial.json").is_file()


def test_the_default_limit_follows_the_deepest_cut_off(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makeconftest(
        "import pytest\n"
        "from pytest_searcheval.targets import CallableTarget\n"
        "ASKED = []\n"
        "def ranked(query, *, limit, **kw):\n"
        "    ASKED.append(limit)\n"
        "    return ['d1', 'd2', 'd3', 'd4', 'd5'][:limit]\n"
        "@pytest.fixture(scope='session')\n"
        "def searcheval_target():\n"
        "    yield CallableTarget(ranked, profiles=['hybrid'])\n"
        "    assert set(ASKED) == {100}, ASKED\n"
    )
    result = pytester.runpytest(
        "--search-eval",
        "--search-eval-measures=nDCG@10,R@100,P@50",
        "--search-eval-profiles=hybrid",
        "--search-eval-gate-over=",
        "-p",
        "no:cacheprovider",
    )
    assert "ERROR at teardown" not in result.stdout.str()
    assert set(read_report(pytester)["profiles"]["hybrid"]["measures"]) == {
        "nDCG@10",
        "R@100",
        "P@50",
    }


def test_a_limit_below_a_cut_off_is_a_usage_error(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    result = pytester.runpytest(
        "--search-eval", "--search-eval-measures=nDCG@10,R@100", "--search-eval-limit=20"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--search-eval-limit=20 is below the cut-off of R@100 (--search-eval-measures)*"
            "Set the limit to at least 100*"
        ]
    )


FAILING_RULE = """

from pytest_searcheval.baseline.gate import GateContext, Rule, gate_rule


@gate_rule("project rule")
def project_rule(ctx: GateContext) -> Rule:
    return Rule("project rule", "failed", f"{ctx.gated} is not good enough")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_gate_that_alone_fails_is_a_failed_test_in_junit_and_the_last_line(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    import xml.etree.ElementTree as ET

    if workers:
        pytest.importorskip("xdist")  # the core install (CI's second job) has no pytest-xdist
    make_project(pytester)
    conftest = pytester.path / "conftest.py"
    conftest.write_text(conftest.read_text() + FAILING_RULE)
    result = pytester.runpytest_subprocess(
        "--search-eval", "--junitxml=junit.xml", "-p", "no:cacheprovider", *workers
    )
    assert result.ret == 1
    lines = result.stdout.str().strip().splitlines()
    assert "1 failed, 4 passed" in lines[-1], lines[-1]
    result.stdout.fnmatch_lines(
        [
            "*[[]failed[]] project rule: hybrid is not good enough",
            "FAILED collection.yaml::test_gate - gate: FAILED: 1 of * rules failed*",
        ]
    )
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and suite.get("tests") == "5"
    (case,) = [c for c in suite.iter("testcase") if c.get("name") == "test_gate"]
    failure = case.find("failure")
    assert failure is not None and "project rule" in (failure.get("message") or "")


def test_a_partial_run_never_says_passed_and_names_what_it_could_not_judge(
    pytester: pytest.Pytester,
) -> None:
    make_project(pytester)
    pytester.runpytest("--search-eval", "--search-eval-update-baseline", "-p", "no:cacheprovider")
    result = pytester.runpytest("--search-eval", "-k", "q1", "-p", "no:cacheprovider")
    assert result.ret == 0
    out = result.stdout.str()
    assert "gate: PASSED" not in out
    result.stdout.fnmatch_lines(
        [
            "gate: NOT JUDGED (partial run (selected tests only): could not judge "
            "hybrid nDCG@10 vs baseline, hybrid R@20 vs baseline, hybrid >= lexical on nDCG@10, "
            "hybrid >= lexical on R@20, hybrid no-result accuracy vs baseline; no rule failed)"
        ]
    )
    md = (pytester.path / "searcheval-report" / "report-partial.md").read_text()
    assert "**Gate: not judged**" in md and "Gate: passed" not in md


def test_a_grade_scale_the_qrels_contradict_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".jsonl",
        corpus='{"_id": "d1", "title": "Tide tables", "text": "High and low water."}\n'
        '{"_id": "d2", "title": "Star charts", "text": "Constellations by month."}\n',
        queries='{"_id": "q1", "text": "tide tables"}\n',
    )
    pytester.mkdir("qrels")
    (pytester.path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n"
    )
    result = pytester.runpytest(
        "--search-eval", "--search-eval-grades=0-3", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines(["ERROR: *no query has a judged document of grade >= 2*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert "items.py" not in result.stdout.str()
