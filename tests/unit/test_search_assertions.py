"""The pytest-free part of hand-written search tests: result objects, snapshot file, tolerances."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_searcheval.assertions import Context, Measures, MeasureUndefined, SearchResult
from pytest_searcheval.assertions.snapshot import (
    Entry,
    SnapshotError,
    Tolerance,
    compare,
    diff,
    read,
    render,
    snapshot_path,
)
from pytest_searcheval.metrics import rbo


def _result(ids: list[str], **context: object) -> SearchResult:
    return SearchResult(
        query="weather",
        profile="hybrid",
        limit=10,
        ids=tuple(ids),
        scores=tuple(float(-i) for i in range(len(ids))),
        context=Context(**context),  # type: ignore[arg-type]
    )


def test_rank_top_and_scores() -> None:
    r = _result(["a", "b", "c"])
    assert r.rank("b") == 2 and r.rank("z") is None
    assert r.top(2) == ["a", "b"] and r.top(2) == ("a", "b") and r.top(2) != ["b", "a"]
    assert "c" not in r.top(2) and "c" in r
    assert r.score("a") == 0.0 and r.score("z") is None
    rank = r.rank("c")
    assert rank is not None and rank.result is r and rank.doc_id == "c"
    with pytest.raises(ValueError, match="positive"):
        r.top(0)


def test_explain_shows_grades_titles_and_the_baseline() -> None:
    r = _result(
        ["a", "b"],
        qid="q1",
        grades={"a": 3},
        titles={"a": "Alpha", "b": "Beta"},
        baseline_ids=("b", "a"),
        baseline_tag="v1",
    )
    text = "\n".join(r.explain(mark=["b"]))
    assert "1  a  grade 3    Alpha" in text
    assert "->  2  b  unjudged   Beta" in text
    assert "baseline ranking (v1):" in text


def test_measures_say_why_a_measure_has_no_value() -> None:
    r = _result(["a"], qid="q3")
    m = Measures({}, "q3", r, ("nDCG@10",), {"relevance_level": 2}, undefined="no relevant")
    with pytest.raises(MeasureUndefined, match="nDCG@10 of query q3: no relevant"):
        m["nDCG@10"]
    with pytest.raises(MeasureUndefined, match="not a measure of this run"):
        m["P@5"]
    assert "measures: none (no relevant)" in m.explain()


def test_a_measure_cut_at_the_run_limit_answers_to_its_plain_name() -> None:
    r = _result(["a"], qid="q1")
    m = Measures({"RR@20": 0.5, "nDCG@10": 1.0}, "q1", r, ("RR@20", "nDCG@10"), {"depth": 20})
    assert m["RR"] == m["RR@20"] == 0.5
    with pytest.raises(MeasureUndefined, match="not a measure of this run"):
        m["nDCG"]  # nDCG over the whole ranking is another measure than nDCG@10


def test_snapshot_text_is_deterministic_and_reads_back(tmp_path: Path) -> None:
    entries = {
        "z query": Entry(("d2", "d1"), "z query", "hybrid", 20),
        "a: tricky 'name'": Entry(("yes", "1e3"), None, None, None),
        "empty": Entry((), "nothing", "lexical", 5),
    }
    text = render("test_x", entries, {"d1": "First\nline", "d2": "Second"})
    assert text == render(
        "test_x", dict(reversed(entries.items())), {"d1": "First\nline", "d2": "Second"}
    )
    assert '    - "d1"  # First line' in text
    path = tmp_path / "s.yaml"
    path.write_text(text)
    assert read(path) == entries


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- a\n", "expected a mapping of names"),
        ("q: {ranking: a}\n", "snapshot 'q', field 'ranking': expected a list"),
        ("q: {ranking: [a, a]}\n", "appears twice"),
        ("q: {ranking: [a], limit: x}\n", "field 'limit': expected an integer"),
        ("q: [\n", "not a readable YAML snapshot"),
    ],
)
def test_a_bad_snapshot_file_names_file_and_field(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(SnapshotError, match=message) as info:
        read(path)
    assert str(path) in str(info.value)


def test_snapshot_path_is_beside_the_test_module() -> None:
    path = snapshot_path(Path("/p/tests/test_shop.py"), "test_rank[usdc api/1]")
    assert path == Path("/p/tests/__rankings__/test_shop/test_rank_usdc_api_1.yaml")


A = Entry(tuple("abcdefghij"), profile="hybrid")


def test_equal_rankings_pass_every_tolerance() -> None:
    for tol in (
        Tolerance(),
        Tolerance(min_rbo=1.0),
        Tolerance(top_k=3),
        Tolerance(max_rank_shift=0),
    ):
        assert compare(A, A, tol) == []


def test_the_default_is_equality_and_depth_cuts_both() -> None:
    swapped = Entry(tuple("abcdefghji"))
    assert compare(A, swapped, Tolerance()) == ["the ranking changed (equal rankings expected)"]
    assert compare(A, swapped, Tolerance(depth=8)) == []


def test_min_rbo_is_the_metrics_rbo() -> None:
    swapped = Entry(tuple("bacdefghij"))
    value = rbo(A.ids, swapped.ids, p=0.9)
    assert 0.85 < value < 0.95
    assert compare(A, swapped, Tolerance(min_rbo=0.85)) == []
    (problem,) = compare(A, swapped, Tolerance(min_rbo=0.95))
    assert problem == f"rank-biased overlap {value:.4f} < min_rbo 0.95 (p 0.9)"


def test_top_k_set_and_max_rank_shift() -> None:
    moved = Entry(tuple("cbadefghij"))
    assert compare(A, moved, Tolerance(top_k=3)) == []
    assert compare(A, moved, Tolerance(max_rank_shift=2)) == []
    assert compare(A, moved, Tolerance(max_rank_shift=1)) == [
        "a moved 2 ranks (1 -> 3) > max_rank_shift 1",
        "c moved 2 ranks (3 -> 1) > max_rank_shift 1",
    ]
    new = Entry(tuple("xbcdefghij"))
    assert compare(A, new, Tolerance(top_k=3)) == ["top-3 sets differ: left it a; entered it x"]
    assert "a (recorded at rank 1) is no longer returned" in compare(
        A, new, Tolerance(max_rank_shift=5)
    )


def test_another_profile_never_matches() -> None:
    other = Entry(A.ids, profile="lexical")
    assert compare(A, other, Tolerance(min_rbo=0.0)) == [
        "recorded with profile 'hybrid', searched with 'lexical'"
    ]


@pytest.mark.parametrize(
    "kwargs",
    [{"min_rbo": 1.5}, {"rbo_p": 1.0}, {"top_k": 0}, {"max_rank_shift": -1}, {"depth": 2.5}],
)
def test_bad_tolerances_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Tolerance(**kwargs)  # type: ignore[arg-type]


def test_the_diff_puts_the_rankings_side_by_side() -> None:
    before = Entry(("a", "b", "c"))
    now = Entry(("b", "a", "x"))
    context = Context(titles={"a": "Alpha", "b": "Beta"}, qid="q1", grades={"a": 3, "b": 1})
    tol = Tolerance(top_k=3)
    text = diff(
        "weather", "t/__rankings__/x.yaml", before, now, compare(before, now, tol), tol, context
    )
    lines = text.splitlines()
    assert lines[0] == (
        "ranking snapshot 'weather' in t/__rankings__/x.yaml is not within tolerance "
        "(same top-3 set):"
    )
    assert lines[1] == "  - top-3 sets differ: left it c; entered it x"
    assert lines[3].split() == [
        "1",
        "a",
        "[grade",
        "3]",
        "Alpha",
        "b",
        "[grade",
        "1]",
        "Beta",
        "(was",
        "2)",
    ]
    assert lines[5].split()[-2:] == ["corpus)", "(new)"]
    assert "  no longer returned: c" in lines
