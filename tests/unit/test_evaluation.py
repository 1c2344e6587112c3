"""The evaluation without pytester: searching, scoring, expectations and failure text on a
collection in memory against a CallableTarget."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from pytest_searcheval.collection.model import Collection, Query
from pytest_searcheval.evaluation import (
    Evaluation,
    check_expectations,
    evaluate_query,
    fill_measures,
    format_failure,
    resolve_profiles,
)
from pytest_searcheval.settings import SearchEvalConfig
from pytest_searcheval.targets import CallableTarget


def _collection() -> Collection:
    queries = {
        "1": Query("1", "weather forecast", "generic", "test", expect={"known_item": "d1"}),
        "2": Query("2", "stock prices", "generic", "test"),
        "3": Query("3", "unicorn rentals", "no-result", "test"),
    }
    judgments = {"1": {"d1": 2, "d3": 1}, "2": {"d2": 1, "d4": 1}}
    return Collection(documents={}, queries=queries, judgments=judgments)


RANKINGS: dict[str, list[str]] = {
    "weather forecast": ["d3", "d1", "d5"],
    "stock prices": ["d2", "d9", "d4"],
    "unicorn rentals": [],
}


def _target(rankings: Mapping[str, list[str]] = RANKINGS, **kw: Any) -> CallableTarget:
    def search(query: str, **_: Any) -> list[str]:
        return list(rankings[query])

    return CallableTarget(search, profiles=("bm25",), **kw)


def _evaluation(**settings: Any) -> Evaluation:
    cfg = SearchEvalConfig(enabled=True, measures=("nDCG@10", "P@2", "RR"), **settings)
    return Evaluation.of(cfg, _collection())


def test_a_row_holds_every_profile_and_the_reasons_of_the_gated_one() -> None:
    ev = _evaluation()
    row = evaluate_query(ev, _target(), ev.collection.queries["1"])
    assert ev.cfg.gated == "bm25" and ev.cfg.relevance_level == 2  # a 1-2 scale: level 2
    assert row["profiles"]["bm25"]["ids"] == ["d3", "d1", "d5"]
    assert [r["code"] for r in row["reasons"]] == ["known-item"]
    # on failure the row carries every measure, for the message
    assert row["profiles"]["bm25"]["measures"]["RR@20"] == pytest.approx(0.5)
    text = format_failure(ev, row)
    assert "known item 'd1' expected at rank <= 1, found at rank 2" in text
    assert "    2  d1  grade 2" in text and "baseline: none for this query" in text


def test_fill_measures_scores_the_evaluated_queries_only() -> None:
    ev = _evaluation(relevance_level=1)
    target = _target()
    rows = {q.id: evaluate_query(ev, target, q) for q in ev.selected_queries()}
    fill_measures(ev, rows)
    assert rows["2"]["profiles"]["bm25"]["measures"]["P@2"] == pytest.approx(0.5)
    assert rows["3"]["profiles"]["bm25"]["measures"] == {}  # no judged document: not scored
    assert rows["3"]["unanswerable"] and rows["3"]["reasons"] == []


def test_an_unanswerable_query_that_is_answered_is_an_unmet_expectation() -> None:
    query = Query("u", "anything", "no-result", "test")
    assert query.unanswerable
    assert [r.code for r in check_expectations(query, ["d1"])] == ["unanswerable-answered"]
    assert check_expectations(query, []) == []


def test_the_answer_is_asked_once_per_query_and_profile() -> None:
    calls: list[str] = []

    def search(query: str, **_: Any) -> list[str]:
        calls.append(query)
        return RANKINGS[query]

    ev = _evaluation()
    target = CallableTarget(search, profiles=("bm25",))
    query = ev.collection.queries["2"]
    evaluate_query(ev, target, query)
    evaluate_query(ev, target, query)
    assert calls == ["stock prices"] and ("2", "bm25") in ev.latency_ms


def test_profiles_follow_the_settings_then_the_targets_defaults_then_its_offer() -> None:
    cfg = SearchEvalConfig(enabled=True, measures=("AP", "nDCG@10"), limit=30)
    offered = {"a": None, "b": None}
    assert resolve_profiles(cfg, offered, {})["gated_profile"] == "a"
    assert resolve_profiles(cfg, offered, {"gated_profile": "b"})["gated_profile"] == "b"
    assert resolve_profiles(cfg, offered, {})["measures"] == ["AP@30", "nDCG@10"]
    assert resolve_profiles(cfg, offered, {"whole": True})["measures"] == ["AP", "nDCG@10"]


def test_a_profile_the_target_does_not_offer_is_unavailable() -> None:
    ev = _evaluation(profiles=("bm25", "dense"))
    row = evaluate_query(ev, _target(), ev.collection.queries["2"])
    assert row["unavailable"] == {"dense": "the target does not offer profile 'dense'"}
    assert list(row["profiles"]) == ["bm25"]


def test_a_malformed_answer_is_that_querys_error_and_the_profile_stays() -> None:
    def search(query: str, **_: Any) -> Any:
        if query == "weather forecast":
            return {"error": "rate limited"}
        return RANKINGS[query]

    ev = _evaluation()
    target = CallableTarget(search, profiles=("bm25",))
    failed = evaluate_query(ev, target, ev.collection.queries["1"])
    answered = evaluate_query(ev, target, ev.collection.queries["2"])
    assert failed["errors"]["bm25"]["error"] == ("malformed answer: response has no 'results' list")
    assert failed["unavailable"] == {} and ev.unavailable == {}
    assert answered["profiles"]["bm25"]["ids"] == ["d2", "d9", "d4"]


def test_a_failed_search_is_that_querys_error_and_the_next_query_is_asked() -> None:
    def search(query: str, **_: Any) -> list[str]:
        if query == "weather forecast":
            raise RuntimeError("503 from the upstream")
        return RANKINGS[query]

    ev = _evaluation()
    target = CallableTarget(search, profiles=("bm25",))
    failed = evaluate_query(ev, target, ev.collection.queries["1"])
    answered = evaluate_query(ev, target, ev.collection.queries["2"])
    assert failed["errors"] == {
        "bm25": {"error": "RuntimeError: 503 from the upstream", "url": None, "attempts": 1}
    }
    assert [r["code"] for r in failed["reasons"]] == ["search-error"]
    assert failed["unavailable"] == {} and ev.unavailable == {}
    assert answered["profiles"]["bm25"]["ids"] == ["d2", "d9", "d4"]
    assert "errors" not in answered and answered["reasons"] == []
    assert "search error on profile 'bm25' after 1 attempt: RuntimeError" in format_failure(
        ev, failed
    )


def test_an_answer_later_than_the_timeout_is_that_querys_error() -> None:
    from pytest_searcheval.targets import Hit, SearchResponse

    def search(query: str, **_: Any) -> SearchResponse:
        late = 5000.0 if query == "stock prices" else 1.0
        return SearchResponse(hits=(Hit("d2", 1.0),), latency_ms=late)

    ev = _evaluation(timeout=2.0)
    target = CallableTarget(search, profiles=("bm25",))
    late = evaluate_query(ev, target, ev.collection.queries["2"])
    assert late["errors"]["bm25"]["error"] == "took 5.0 s > timeout 2 s"
    assert "errors" not in evaluate_query(ev, target, ev.collection.queries["1"])


def test_prepare_stops_at_a_target_that_does_not_answer() -> None:
    from pytest_searcheval.targets import TargetUnreachable

    class Down(CallableTarget):
        def preflight(self) -> None:
            raise TargetUnreachable("ConnectError: refused", url="http://x/", attempts=3)

    ev = _evaluation()
    with pytest.raises(TargetUnreachable, match="refused"):
        ev.prepare(Down(lambda q, **kw: []))
    ev.prepare(_target())  # one that answers
    assert ev.prepared


def test_trec_compat_scores_a_live_ranking_as_trec_eval_scores_its_run_file() -> None:
    """Ties by the dozen, sent in an order of the service's own: the measures equal trec_eval's
    on the same results written as a run file (pytrec_eval reads the scores, as trec_eval
    reads a run file), per query."""
    import random

    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(7)
    docs = [f"d{i:02d}" for i in range(40)]
    queries = {str(q): Query(str(q), f"text {q}", "generic", "test") for q in range(12)}
    judgments = {
        qid: {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(docs, 15)} for qid in queries
    }
    # scores from three values only, listed in a shuffled order: most of the ranking is ties
    results = {
        q.text: [(d, float(rng.choice([1, 2, 3]))) for d in rng.sample(docs, 20)]
        for q in queries.values()
    }
    target = CallableTarget(lambda text, **kw: results[text], profiles=("run",))
    cfg = SearchEvalConfig(
        enabled=True, trec_compat=True, measures=("P@5", "nDCG@10", "R@10", "RR@20")
    )
    ev = Evaluation.of(cfg, Collection(documents={}, queries=queries, judgments=judgments))
    rows = {qid: evaluate_query(ev, target, q) for qid, q in queries.items()}
    fill_measures(ev, rows)
    run = {q.id: {d: s for d, s in results[q.text]} for q in queries.values()}
    names = {"P@5": "P_5", "nDCG@10": "ndcg_cut_10", "R@10": "recall_10", "RR@20": "recip_rank"}
    truth = pytrec_eval.RelevanceEvaluator(judgments, set(names.values())).evaluate(run)
    differ = 0
    for qid, row in rows.items():
        scored = row["profiles"]["run"]
        assert scored["order"] == "trec_eval"
        assert len(scored["ids"]) == 20
        if scored["ids"] != [d for d, _ in results[queries[qid].text]]:
            differ += 1
        for ours, theirs in names.items():
            assert scored["measures"][ours] == pytest.approx(truth[qid][theirs], abs=1e-12), (
                qid,
                ours,
            )
    assert differ == len(queries)  # the service's order was never trec_eval's


def test_trec_compat_keeps_the_services_order_when_it_sends_no_scores() -> None:
    ev = _evaluation(trec_compat=True)
    row = evaluate_query(ev, _target(), ev.collection.queries["1"])
    assert row["profiles"]["bm25"]["order"] == "service"
    assert row["profiles"]["bm25"]["ids"] == ["d3", "d1", "d5"]
    assert (
        "order"
        not in evaluate_query(
            _evaluation(), _target(), Query("1", "weather forecast", "g", "test")
        )["profiles"]["bm25"]
    )


def test_the_report_says_which_order_each_profile_was_scored_in() -> None:
    from pytest_searcheval.report.model import result_order

    ev = _evaluation(trec_compat=True)
    rows = [evaluate_query(ev, _target(), q) for q in ev.selected_queries()]
    # ids only for two queries; the third gets no result at all, which needs no order
    assert result_order(rows) == (
        "bm25: the service's order on 2 queries (results without scores), trec_eval's "
        "(score descending, then docid descending) on the rest"
    )


def test_each_evaluation_keeps_its_own_invariant_context() -> None:
    from pytest_searcheval.invariants.base import (
        GATED,
        InvariantSettings,
        current_context,
        profile_of,
    )

    one, two = _evaluation(), _evaluation()
    target = _target()
    # other tests may have used the process's context; this test must add nothing to it
    before = dict(current_context().caches)
    for ev in (one, two):
        evaluate_query(ev, target, ev.collection.queries["2"])
    assert one.invariant_context.caches and two.invariant_context.caches
    assert one.invariant_context.caches is not two.invariant_context.caches
    assert current_context().caches == before  # nothing went to the process's context
    one.invariant_context.gated = "bm25"
    with one.invariant_context.active():
        assert profile_of(InvariantSettings(profile=GATED)) == "bm25"
    assert profile_of(InvariantSettings(profile=GATED)) == "hybrid"
    one.close()
    assert one.invariant_context.caches == {} and one.cache == {}


def test_a_run_file_is_measured_at_first_use_as_the_session_end_measures_whole_lists(
    tmp_path: Any,
) -> None:
    """Every query of a run file is scored in one batch when the first query test asks; the
    row keeps the report's depth of ids and the values the session end would compute from
    the whole ranking."""
    import random

    from pytest_searcheval.targets.run import RunTarget

    rng = random.Random(3)
    queries = {str(q): Query(str(q), f"q{q}", "generic", "test") for q in range(40)}
    judgments = {
        str(q): {f"d{d}": rng.randint(0, 2) for d in rng.sample(range(300), 8)}
        for q in range(38)  # two queries judged nowhere
    }
    lines = [
        f"{q} Q0 d{d} {k} {rng.randint(0, 30) / 10} t\n"
        for q in range(39)  # query 39 unanswered
        for k, d in enumerate(rng.sample(range(300), 60), start=1)
    ]
    (tmp_path / "a.run").write_text("".join(lines))
    coll = Collection(documents={}, queries=queries, judgments=judgments)
    measures = ("nDCG@10", "P@5", "R@20", "RR", "AP", "bpref")
    for trec_compat in (True, False):
        cfg = SearchEvalConfig(enabled=True, measures=measures, trec_compat=trec_compat)
        ev = Evaluation.of(cfg, coll)
        target = RunTarget([tmp_path / "a.run"], coll)
        rows = {q.id: evaluate_query(ev, target, q) for q in ev.selected_queries()}
        assert set(ev.batched) == {"a"}
        whole = {qid: ev.search(target, queries[qid], "a").ids for qid in rows}  # type: ignore[union-attr]
        expected = {
            qid: {"profiles": {"a": {"ids": ids, "measures": {}}}} for qid, ids in whole.items()
        }
        fill_measures(ev, expected)  # the session end's rule, on the whole rankings
        for qid, row in rows.items():
            data = row["profiles"]["a"]
            assert data["measures"] == expected[qid]["profiles"]["a"]["measures"], qid
            assert data["returned"] == len(whole[qid])
            assert data["ids"] == whole[qid][:20]  # R@20: the deepest cut-off measured
        assert rows["38"]["profiles"]["a"]["measures"] == {}  # judged nowhere
        filled = {qid: dict(row) for qid, row in rows.items()}
        fill_measures(ev, filled)  # leaves the batch's values as they are
        assert filled == rows
