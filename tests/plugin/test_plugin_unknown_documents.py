"""A result the corpus does not hold is its own reason: counted apart from hard-filter
violations, failing only its query test, and excusable by the baseline's ledger."""

from __future__ import annotations

import json

import pytest
from plugin_helpers import read_report

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse


def search(query, *, profile, limit, filters=None, extract=True):
    # query 2 is answered from a live index ahead of the corpus: "d9" is not in corpus.jsonl
    ids = ["d9", "d2"] if query == "green pears" else ["d1", "d2"]
    return SearchResponse(hits=tuple(Hit(d, 1.0 / (i + 1)) for i, d in enumerate(ids[:limit])))


@pytest.fixture(scope="session")
def searcheval_target():
    return CallableTarget(search, profiles=("default",))
"""


def _project(pytester: pytest.Pytester) -> None:
    docs = {"d1": "red apples", "d2": "green pears"}
    (pytester.path / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": t, "text": t}) + "\n" for d, t in docs.items())
    )
    queries = {"1": "red apples", "2": "green pears"}
    (pytester.path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items())
    )
    (pytester.path / "qrels").mkdir()
    (pytester.path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t1\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.makeini(
        "[pytest]\nsearch_eval_collection = .\nsearch_eval_profiles = default\n"
        "search_eval_bootstrap_samples = 50\nsearch_eval_permutations = 50\n"
    )


def _project_with_no_result_query(pytester: pytest.Pytester) -> None:
    """The project, and query 3, of class no-result, answered like query 1."""
    _project(pytester)
    with (pytester.path / "queries.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "3", "text": "plums", "metadata": {"class": "no-result"}}))
        fh.write("\n")
    with (pytester.path / "qrels" / "test.tsv").open("a") as fh:
        fh.write("3\td1\t0\n")  # judged, so in the test split


def _failed(out: str) -> list[str]:
    """The node ids of a run's FAILED summary lines, sorted."""
    return sorted(line.split()[1] for line in out.splitlines() if line.startswith("FAILED "))


def test_an_unknown_document_is_counted_apart_and_excused_by_the_ledger(
    pytester: pytest.Pytester,
) -> None:
    _project(pytester)
    first = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", "-rA")
    out = first.stdout.str()
    assert "FAILED queries.jsonl::test_query[2]" in out
    assert "'d9' is not a document of the corpus" in out
    assert "[passed] hard filters respected" in out
    assert "1 results are no document of the corpus" in out
    entry = read_report(pytester)["profiles"]["default"]
    assert (entry["hard_filter_violations"], entry["unknown_documents"]) == (0, 1)

    # Recorded in a baseline, the same result is a known failure (xfail), not a new one.
    update = pytester.runpytest_subprocess(
        "--search-eval", "--search-eval-update-baseline", "-p", "no:cacheprovider"
    )
    assert (pytester.path / "baselines" / "baseline.json").is_file(), update.stdout.str()[-2000:]
    again = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", "-rA")
    assert "XFAIL queries.jsonl::test_query[2]" in again.stdout.str(), again.stdout.str()[-3000:]


def test_one_bad_result_is_one_failure(pytester: pytest.Pytester) -> None:
    """Threshold compliance searches an unconstrained query as its query test does; that
    result's unknown documents and answered unanswerable query fail the query test alone."""
    _project_with_no_result_query(pytester)
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", "-rA")
    out = result.stdout.str()
    failed = _failed(out)
    assert failed == [
        "queries.jsonl::test_query[2-generic]",
        "queries.jsonl::test_query[3-no-result]",
    ], out[-3000:]
    assert "PASSED queries.jsonl::test_invariant[threshold-compliance-2]" in out
    assert "PASSED queries.jsonl::test_invariant[threshold-compliance-3]" in out
    assert "unanswerable query returned 2 results (expected none)" in out


REVERSED = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.reverse()  # the invariant cases run before the query tests
"""


@pytest.mark.parametrize("order", ["reversed", "xdist"])
def test_one_bad_result_is_one_failure_in_any_order_or_worker(
    pytester: pytest.Pytester, order: str
) -> None:
    """Where the check lands is decided by which query tests the session selected, the same
    on every worker: not by whether the query test happened to run first in this process."""
    _project_with_no_result_query(pytester)
    if order == "reversed":
        pytester.makeconftest(pytester.path.joinpath("conftest.py").read_text() + REVERSED)
        args: tuple[str, ...] = ()
    else:
        pytest.importorskip("xdist")
        args = ("-n", "2")
    result = pytester.runpytest_subprocess("--search-eval", "-p", "no:cacheprovider", "-rA", *args)
    out = result.stdout.str()
    failed = _failed(out)
    assert failed == [
        "queries.jsonl::test_query[2-generic]",
        "queries.jsonl::test_query[3-no-result]",
    ], out[-3000:]


def test_a_bad_result_no_query_test_judged_fails_the_invariant(
    pytester: pytest.Pytester,
) -> None:
    """With the query tests deselected (-k) nothing else judges the result: threshold
    compliance fails the unknown document and the answered no-result query itself."""
    _project_with_no_result_query(pytester)
    result = pytester.runpytest_subprocess(
        "--search-eval", "-p", "no:cacheprovider", "-rA", "-k", "threshold"
    )
    out = result.stdout.str()
    failed = _failed(out)
    assert failed == [
        "queries.jsonl::test_invariant[threshold-compliance-2]",
        "queries.jsonl::test_invariant[threshold-compliance-3]",
    ], out[-3000:]
    assert "rank 1: 'd9' is not a document of the collection" in out
    assert "unanswerable query returned 2 result(s); expected none" in out
    assert "PASSED queries.jsonl::test_query" not in out
