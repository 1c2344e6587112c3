"""TREC files through the plugin: qrels + topics as the collection, run files as profiles,
trec_eval's conventions for the whole run, and run-file errors with file and line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from plugin_helpers import assert_valid

pytest_plugins = ["pytester"]

QRELS = """\
1 0 d1 2
1 0 d2 0
1 0 d3 1
1 0 d4 1
2 0 d2 1
2 0 d5 0
3 0 d1 0
3 0 d6 1
4 0 d3 0
"""
# Query 3 has no relevant document at level 2 (only at level 1); query 4 has none at all;
# query 5 is judged nowhere. bm25 leaves query 2 unanswered; ties in run b are broken by
# docid descending, as trec_eval does.
TOPICS = "1\tred apples\n2\tgreen pears\n3\tcherry jam\n4\tplums\n5\tfigs\n"
RUN_A = """\
1 Q0 d3 1 9.0 bm25
1 Q0 d1 2 8.0 bm25
1 Q0 d9 3 7.0 bm25
1 Q0 d2 4 6.0 bm25
3 Q0 d6 1 3.0 bm25
4 Q0 d3 1 1.0 bm25
"""
RUN_B = """\
1 Q0 d1 1 5.0 dense
1 Q0 d4 2 5.0 dense
1 Q0 d3 3 4.0 dense
2 Q0 d5 1 2.0 dense
2 Q0 d2 2 1.0 dense
3 Q0 d1 1 1.0 dense
"""


def _project(pytester: pytest.Pytester) -> None:
    (pytester.path / "qrels.txt").write_text(QRELS)
    (pytester.path / "topics.tsv").write_text(TOPICS)
    (pytester.path / "bm25.run").write_text(RUN_A)
    (pytester.path / "dense.run").write_text(RUN_B)
    pytester.makeini(
        "[pytest]\nsearch_eval_qrels = qrels.txt\nsearch_eval_topics = topics.tsv\n"
        "search_eval_run = bm25.run,dense.run\nsearch_eval_gated_profile = dense\n"
        "search_eval_bootstrap_samples = 100\nsearch_eval_permutations = 200\n"
        "search_eval_measures = nDCG@10,P@5,R@20,RR,AP,bpref\n"
    )


def _report(pytester: pytest.Pytester) -> dict:  # type: ignore[type-arg]
    data = json.loads((pytester.path / "searcheval-report" / "report.json").read_text())
    assert_valid(data, "report.schema.json")
    return data  # type: ignore[no-any-return]


@pytest.mark.parametrize("trec_compat", [False, True])
def test_the_manifest_states_the_conventions_the_numbers_were_computed_under(
    pytester: pytest.Pytester, trec_compat: bool
) -> None:
    _project(pytester)
    mode = ["--search-eval-trec-compat"] if trec_compat else ["--search-eval-relevance-level=1"]
    result = pytester.runpytest_subprocess("--search-eval", *mode, "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = _report(pytester)
    manifest = report["metric_manifest"]
    # Query 4 is judged but has no relevant document; query 5 is judged nowhere.
    q4 = report["queries"]["4"]
    bm25 = report["profiles"]["bm25"]
    assert manifest["mode"] == ("trec_compat" if trec_compat else "default")
    without = manifest["queries_without_relevant_documents"]
    if trec_compat:
        assert q4["evaluated"] and q4["profiles"]["bm25"]["measures"]["nDCG@10"] == 0.0
        assert bm25["evaluated"] == 4 == bm25["measures"]["nDCG@10"]["n"]
        assert "scored 0" in without and "excluded" not in without
        assert "it is judged" in manifest["evaluated_queries"]
    else:
        assert not q4["evaluated"] and q4["profiles"]["bm25"]["measures"] == {}
        assert bm25["evaluated"] == 3 == bm25["measures"]["nDCG@10"]["n"]
        assert "excluded" in without and "scored 0" not in without
        assert "grade >= the relevance level (1)" in manifest["evaluated_queries"]
    assert not report["queries"]["5"]["evaluated"]


def test_trec_compat_run_files_equal_pytrec_eval_per_query(pytester: pytest.Pytester) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    _project(pytester)
    result = pytester.runpytest_subprocess(
        "--search-eval", "--search-eval-trec-compat", "-p", "no:cacheprovider"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    report = _report(pytester)
    run = report["run"]
    assert run["trec_compat"] and run["relevance_level"] == 1 and run["gain"] == "linear"
    # Run files are ranked whole: the measures keep trec_eval's uncut names.
    assert run["measures"] == ["nDCG@10", "P@5", "R@20", "RR", "AP", "bpref"]

    qrels: dict[str, dict[str, int]] = {}
    for line in QRELS.splitlines():
        q, _, d, g = line.split()
        qrels.setdefault(q, {})[d] = int(g)
    names = {"nDCG@10": "ndcg_cut_10", "P@5": "P_5", "R@20": "recall_20", "RR": "recip_rank",
             "AP": "map", "bpref": "bpref"}  # fmt: skip
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, {"ndcg_cut.10", "P.5", "recall.20", "recip_rank", "map", "bpref"}
    )
    for profile, text in (("bm25", RUN_A), ("dense", RUN_B)):
        runs: dict[str, dict[str, float]] = {}
        for line in text.splitlines():
            q, _, d, _, s, _ = line.split()
            runs.setdefault(q, {})[d] = float(s)
        # trec_eval -c: a judged query absent from the run scores 0 and counts.
        for q in qrels:
            runs.setdefault(q, {})
        expected = evaluator.evaluate(runs)
        for qid in qrels:
            got = report["queries"][qid]["profiles"][profile]["measures"]
            for ours, theirs in names.items():
                assert math.isclose(got[ours], expected[qid][theirs], abs_tol=1e-9), (
                    profile,
                    qid,
                    ours,
                    got[ours],
                    expected[qid][theirs],
                )
        means = report["profiles"][profile]["measures"]
        for ours, theirs in names.items():
            want = sum(expected[q][theirs] for q in qrels) / len(qrels)
            assert math.isclose(means[ours]["mean"], want, abs_tol=1e-9), (profile, ours)
    result.stdout.fnmatch_lines(["*relevance measures over 4 of 5 queries: every judged query*"])
    # A classless collection's ids carry no class suffix.
    assert "test_query[1-generic]" not in result.stdout.str()
    # Run files are looked up, not searched: no latency column in any rendering.
    out = result.stdout.str()
    header = next(line for line in out.splitlines() if line.startswith("profile "))
    assert "p95" not in header and "viol." in header
    folder = pytester.path / "searcheval-report"
    assert "p95 ms" not in (folder / "report.md").read_text()
    assert "p95 ms" not in (folder / "report.html").read_text()


def test_default_mode_says_which_queries_enter_the_aggregates(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess(
        "--search-eval", "--search-eval-relevance-level=2", "-p", "no:cacheprovider"
    )
    result.stdout.fnmatch_lines(
        [
            "relevance measures over 1 of 5 queries (a judged document of grade >= 2); left out: "
            "4 with no document of grade >= 2: 2, 3, 4, 5"
        ]
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("9 Q0 d1 1 1.0 x", "bad.run:2 [qid]: query '9' is not a query of the collection"),
        ("1 Q0 d3 2 nan x", "bad.run:2 [score]: expected a finite number, got 'nan'"),
        ("1 Q0 d3 2 1.0 x\n1 Q0 d3 3 0.5 x", "bad.run:3 [docid]: document 'd3' appears twice"),
        ("1 Q0 d3 1.0", "bad.run:2: expected 'qid Q0 docid rank score tag' (6 fields), got 4"),
    ],
)
def test_a_bad_run_file_is_a_usage_error_with_file_and_line(
    pytester: pytest.Pytester, line: str, message: str
) -> None:
    _project(pytester)
    (pytester.path / "bad.run").write_text("1 Q0 d1 1 2.0 x\n" + line + "\n")
    result = pytester.runpytest_subprocess(
        "--search-eval", "--search-eval-run=bad.run", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert message in result.stdout.str() + result.stderr.str()


def test_ide_collection_with_the_ini_key_and_a_pasted_node_id(pytester: pytest.Pytester) -> None:
    _project(pytester)
    with (pytester.path / "tox.ini").open("a") as fh:
        fh.write("\nsearch_eval = true\n")
    # What a test explorer runs: plain pytest --collect-only.
    collected = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [line for line in collected.stdout.lines if "test_query[" in line]
    assert len(ids) == 5, collected.stdout.str()
    one = ids[0].strip()
    ran = pytester.runpytest_subprocess(one, "-p", "no:cacheprovider")
    ran.assert_outcomes(passed=1)
    assert (pytester.path / "searcheval-report" / "report-partial.json").is_file()
    assert not Path(pytester.path / "searcheval-report" / "report.json").exists()


def test_node_ids_of_a_collection_outside_the_rootdir_paste_back(
    pytester: pytest.Pytester,
) -> None:
    outside = pytester.path.parent / f"{pytester.path.name}-collection"
    outside.mkdir()
    (outside / "qrels.txt").write_text(QRELS)
    (outside / "topics.tsv").write_text(TOPICS)
    (outside / "bm25.run").write_text(RUN_A)
    pytester.makeini(
        f"[pytest]\nsearch_eval_qrels = {outside}/qrels.txt\n"
        f"search_eval_topics = {outside}/topics.tsv\nsearch_eval_run = {outside}/bm25.run\n"
    )
    collected = pytester.runpytest_subprocess(
        "--search-eval", "--collect-only", "-q", "-p", "no:cacheprovider"
    )
    ids = [line for line in collected.stdout.lines if "test_query[" in line]
    # The tests belong to the ini file that configures the run: a path under the rootdir.
    assert ids and all(i.startswith("tox.ini::test_query[") for i in ids), ids
    ran = pytester.runpytest_subprocess("--search-eval", ids[1], "-p", "no:cacheprovider")
    ran.assert_outcomes(passed=1)


def test_the_report_keeps_the_top_of_each_ranking_unless_asked_for_all(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    deep = "".join(f"1 Q0 x{k:02d} {k} {100 - k} bm25\n" for k in range(1, 31))
    (pytester.path / "bm25.run").write_text(RUN_A + deep)
    args = ("--search-eval", "--search-eval-trec-compat", "-p", "no:cacheprovider")
    assert pytester.runpytest_subprocess(*args).ret == 0
    kept = _report(pytester)["queries"]["1"]["profiles"]["bm25"]
    # R@20 is the deepest cut-off measured: 20 of the 34 results, measures over all 34
    assert kept["returned"] == 34 and len(kept["ids"]) == len(kept["grades"]) == 20
    assert kept["ids"][:4] == ["x01", "x02", "x03", "x04"]
    top = kept["measures"]
    assert pytester.runpytest_subprocess(*args, "--search-eval-report-rankings=full").ret == 0
    full = _report(pytester)["queries"]["1"]["profiles"]["bm25"]
    assert full["returned"] == len(full["ids"]) == 34 and full["ids"][-1] == "d2"
    assert full["measures"] == top


def test_a_query_test_makes_no_fixture_definition_of_its_own(pytester: pytest.Pytester) -> None:
    """pytest makes a fixture definition for ``request`` (a signature inspection) each time a
    test's closure asks for it; the query tests hand it their own request instead."""
    _project(pytester)
    pytester.makeconftest(
        """
        import _pytest.fixtures as fixtures

        made = []
        original = fixtures.RequestFixtureDef.__init__

        def counted(self, request):
            made.append(request.node.nodeid)
            original(self, request)

        fixtures.RequestFixtureDef.__init__ = counted

        def pytest_sessionfinish(session):
            print(f"REQUEST-DEFS {sum('test_query' in n for n in made)}")
        """
    )
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", "-s")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*REQUEST-DEFS 0*"])
    assert _report(pytester)["run"]["queries_run"] == 5


def test_a_query_a_run_file_lacks_is_named(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(
        [
            "run *bm25.run has no ranking for 2 queries: 2, 5 (each an empty ranking: 0 where "
            "the query is scored)",
            "run *dense.run has no ranking for 2 queries: 4, 5 *",
        ]
    )
    notes = [n for n in _report(pytester)["limitations"] if "has no ranking for" in n]
    assert len(notes) == 2 and notes[0].endswith(
        "bm25.run has no ranking for 2 queries: 2, 5 (each an empty ranking: 0 where the "
        "query is scored)"
    )
