"""The run-file reader that ranks in arrays: trec_eval's order, the same strict errors as the
line-by-line reader, and the same answers whichever of its two paths reads a file."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pytest

from pytest_searcheval.collection import trec
from pytest_searcheval.collection.io import CollectionError, Problems
from pytest_searcheval.collection.trec import read_trec_run, read_trec_run_ranked


def _trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's ranking spelled out: score descending, then docid descending."""
    return [d for d, _ in sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def _random_run(path: Path, seed: int, *, split_queries: bool = False) -> None:
    rng = random.Random(seed)
    lines = []
    for q in range(30):
        docs = rng.sample(range(5000), rng.randint(1, 60))
        for k, d in enumerate(docs, start=1):
            # one decimal: many ties in score, so the docid order decides
            lines.append(f"{q} Q0 doc{d} {k} {rng.randint(0, 9) / 10} tag\n")
    if split_queries:
        rng.shuffle(lines)
    path.write_text("".join(lines))


@pytest.mark.parametrize("split_queries", [False, True])
def test_ranks_as_trec_eval_with_ties_and_queries_in_several_blocks(
    tmp_path: Path, split_queries: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.run"
    _random_run(path, 7, split_queries=split_queries)
    problems = Problems()
    expected = read_trec_run(path, "a.run", problems)
    with monkeypatch.context() as patch:  # a well-formed ASCII file never needs the exact path
        patch.setattr(trec, "read_trec_run", None)
        ranked = read_trec_run_ranked(path, "a.run", problems)
    problems.raise_if_any()
    assert set(ranked.spans) == set(expected)
    for qid, docs in expected.items():
        assert ranked.ids(qid) == _trec_order(docs)
        start, stop = ranked.spans[qid]
        assert ranked.scores[start:stop].tolist() == [docs[d] for d in _trec_order(docs)]
    assert ranked.ids("no such query") == []
    assert ranked.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_non_ascii_file_takes_the_exact_path_with_the_same_order(tmp_path: Path) -> None:
    path = tmp_path / "u.run"
    path.write_text("1 Q0 é 1 1.0 t\n1 Q0 z 2 1.0 t\n1 Q0 ä 3 2.0 t\n2 Q0 x 1 0.5 t\n", "utf-8")
    ranked = read_trec_run_ranked(path, "u.run", Problems())
    assert not ranked.ascii
    assert ranked.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # code-point order is UTF-8 byte order: é (U+00E9) > ä (U+00E4) > z
    assert ranked.ids("1") == ["ä", "é", "z"]
    assert ranked.ids("2") == ["x"]


BAD = [
    ("1 Q0 d1 1 1.0\n", "bad.run:1: expected 'qid Q0 docid rank score tag' (6 fields), got 5"),
    ("1 Q0 d1 1 1.0 t\n1 Q0 d2 1 2.0 t extra\n", "bad.run:2: "),
    ("1 Q0 d1 one 1.0 t\n", "bad.run:1 [rank]: expected an integer rank, got 'one'"),
    ("1 Q0 d1 1 high t\n", "bad.run:1 [score]: expected a number"),
    ("1 Q0 d1 1 nan t\n", "bad.run:1 [score]: expected a finite number"),
    ("1 Q0 d1 1 1.0 t\n1 Q0 d1 2 0.5 t\n", "bad.run:2 [docid]: document 'd1' appears twice"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_line_is_refused_with_file_line_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.run"
    path.write_text(text)
    problems = Problems()
    read_trec_run_ranked(path, "bad.run", problems)
    with pytest.raises(CollectionError) as info:
        problems.raise_if_any()
    assert message in str(info.value)
    assert "bad.run" in str(info.value)


def test_an_unknown_query_is_refused_at_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "a.run"
    path.write_text("1 Q0 d1 1 1.0 t\n9 Q0 d1 1 1.0 t\n9 Q0 d2 2 0.5 t\n")
    problems = Problems()
    read_trec_run_ranked(path, "a.run", problems, known_queries={"1"})
    with pytest.raises(CollectionError, match=r"a.run:2.*'9' is not a query"):
        problems.raise_if_any()


def test_lines_across_read_blocks_and_blank_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trec, "_CHUNK", 64)  # many blocks, lines cut at their ends
    path = tmp_path / "a.run"
    _random_run(path, 3)
    path.write_text("\n" + path.read_text().replace("\n", "\n\n", 5).rstrip("\n"))
    problems = Problems()
    ranked = read_trec_run_ranked(path, "a.run", problems)
    expected = read_trec_run(path, "a.run", problems)
    problems.raise_if_any()
    assert ranked.ascii
    assert {q: ranked.ids(q) for q in expected} == {
        q: _trec_order(docs) for q, docs in expected.items()
    }


def test_scores_equal_as_a_c_float_tie_and_go_by_docid(tmp_path: Path) -> None:
    # trec_eval keeps a score in a 32-bit float: 1.00000001 and 1.0 are one score there
    path = tmp_path / "f.run"
    path.write_text("1 Q0 a 1 1.00000001 t\n1 Q0 b 2 1.0 t\n1 Q0 c 3 0.5 t\n")
    assert read_trec_run_ranked(path, "f.run", Problems()).ids("1") == ["b", "a", "c"]


def test_a_ranking_decodes_what_is_read_and_finds_documents_by_their_bytes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.run"
    path.write_text("1 Q0 d2 1 3 t\n1 Q0 d10 2 2 t\n1 Q0 d1 3 1 t\n2 Q0 é 1 1 t\n")
    run = read_trec_run_ranked(path, "a.run", Problems())
    ranking = run.ranking("1")
    assert len(ranking) == 3 and ranking[:2] == ["d2", "d10"] and ranking[-1] == "d1"
    assert list(ranking) == run.ids("1") == ["d2", "d10", "d1"]
    # absent, longer than any id held (not cut into a false match), a prefix of one
    found = ranking.positions(["d1", "missing", "d10xxxxxxxxx", "d", "d2"])
    assert found.tolist() == [2, -1, -1, -1, 0]
    assert run.ranking("2").positions(["é", "e"]).tolist() == [0, -1]
    assert run.ranking("no such query").positions(["d1"]).tolist() == [-1]
    with pytest.raises(IndexError):
        run.ranking("2")[1]


def _as_lines_read(path: Path) -> dict[str, list[tuple[str, float]]]:
    """What the line-by-line reader makes of a file, in trec_eval's order with its scores."""
    ranked = trec._ranked_from_mapping(read_trec_run(path, "f.run", Problems()))
    return {
        q: list(zip(ranked.ids(q), ranked.scores[a:b].tolist(), strict=True))
        for q, (a, b) in ranked.spans.items()
    }


@pytest.mark.parametrize(
    "lines",
    [
        # plain decimals of every form float() takes, signs, -0.0 beside 0.0 (a tie)
        ["1 Q0 a 1 -0.0 t", "1 Q0 b 2 0 t", "1 Q0 c 3 .5 t", "1 Q0 d 4 5. t", "1 Q0 e 5 -12.25 t"],
        # fifteen digits exact; 17 and an exponent go by tokens, with the same values
        ["1 Q0 a 1 123456789012345 t", "1 Q0 b 2 0.30000000000000004 t", "2 Q0 c 1 1e-3 t"],
        # equal as a C float, different as a double: a tie, by docid
        ["1 Q0 a 1 0.1 t", "1 Q0 b 2 0.100000001 t", "1 Q0 c 3 0.1000000001 t"],
        # ids longer than 8 bytes (two words), prefixes of each other, one of 130 bytes
        ["1 Q0 doc-000000001 1 1 t", "1 Q0 doc-00000000 2 1 t", "1 Q0 doc 3 1 t",
         "1 Q0 doc-000000001x 4 1 t", "2 Q0 " + "z" * 130 + " 1 1 t"],
        # queries all as long (one grid, no padding), ties in score, a duplicate in none
        [f"{q} Q0 d{(k * 7 + q) % 10} {k} {k % 3} t" for q in range(4) for k in range(10)],
        # one long query beside short ones: ranked query by query
        [f"1 Q0 d{k} {k} {k % 3} t" for k in range(3000)] + ["2 Q0 a 1 1 t", "3 Q0 b 1 2 t"],
        # tabs, a blank line, a CR: read by tokens
        ["1\tQ0\ta\t1\t2\tt", "", "1 Q0 b 2 2 t\r", "2 Q0 c 1 1 t"],
    ],
)  # fmt: skip
def test_every_way_of_reading_a_file_gives_the_line_readers_ranking(
    tmp_path: Path, lines: list[str]
) -> None:
    path = tmp_path / "f.run"
    path.write_text("\n".join(lines) + "\n")
    ranked = read_trec_run_ranked(path, "f.run", Problems())
    got = {
        q: list(zip(ranked.ids(q), ranked.scores[a:b].tolist(), strict=True))
        for q, (a, b) in ranked.spans.items()
    }
    assert got == _as_lines_read(path)


def test_the_common_layout_is_cut_by_offsets_with_exact_scores(tmp_path: Path) -> None:
    import numpy as np

    rng = random.Random(5)
    lines = []
    for q in range(20):
        for k in range(1, 50):
            score = f"{rng.choice(['-', ''])}{rng.random() * 99:.{rng.randint(0, 9)}f}"
            lines.append(f"{q} Q0 D{rng.randrange(10**6)} {k} {score} run\n")
    data = "".join(lines).encode()
    cut = trec._columns_simple(np.frombuffer(data, dtype=np.uint8), 1 << 20)
    assert cut is not None  # the offset path takes it
    tokens = data.split()
    assert cut[0].tolist() == tokens[0::6] and cut[1].tolist() == tokens[2::6]
    assert cut[2].tolist() == [float(t) for t in tokens[4::6]]  # bit for bit
    for odd in (b"1 Q0 a 1 2 t", b"1 Q0 a 1 2  t\n", b"1 Q0 a x 2 t\n", b"1 Q0 a 1 2-1 t\n",
                b"1 Q0 a 1 1.2.3 t\n", b"1 Q0 a 1 . t\n", b" 1 Q0 a 1 2 t\n"):  # fmt: skip
        assert trec._columns_simple(np.frombuffer(odd, dtype=np.uint8), 1 << 20) is None, odd


def test_a_document_listed_twice_with_different_scores_is_found(tmp_path: Path) -> None:
    path = tmp_path / "f.run"
    path.write_text("1 Q0 a 1 3 t\n1 Q0 b 2 2 t\n2 Q0 a 1 1 t\n1 Q0 a 3 1 t\n")
    problems = Problems()
    read_trec_run_ranked(path, "f.run", problems)
    with pytest.raises(CollectionError, match=r"f\.run:4 \[docid\]: document 'a' appears twice"):
        problems.raise_if_any()


@pytest.mark.parametrize("sizes", [(3, 3, 2), (3, 1, 2)])  # a square grid and a padded one
def test_a_document_listed_twice_is_found_in_a_grid_of_either_shape(
    tmp_path: Path, sizes: tuple[int, ...]
) -> None:
    lines = [f"{q} Q0 d{k} {k} {k} t" for q, size in enumerate(sizes) for k in range(size)]
    lines.append("2 Q0 d0 9 0.5 t")  # the last query lists d0 a second time
    path = tmp_path / "f.run"
    path.write_text("\n".join(lines) + "\n")
    problems = Problems()
    read_trec_run_ranked(path, "f.run", problems)
    with pytest.raises(CollectionError, match=r"document 'd0' appears twice for query '2'"):
        problems.raise_if_any()


@pytest.mark.parametrize("even", [True, False])
def test_locating_many_queries_at_once_finds_what_each_ranking_finds(
    tmp_path: Path, even: bool
) -> None:
    rng = random.Random(11)
    lines = []
    for q in range(25):
        size = 40 if even else rng.randint(1, 40)
        for k, d in enumerate(rng.sample(range(200), size), start=1):
            lines.append(f"{q} Q0 d{d} {k} {rng.randint(0, 5)} t\n")
    path = tmp_path / "f.run"
    path.write_text("".join(lines))
    run = read_trec_run_ranked(path, "f.run", Problems())
    wanted = {
        str(q): [f"d{d}" for d in rng.sample(range(200), rng.randint(0, 30))] for q in range(27)
    }
    wanted["3"] += ["d1" + "0" * 20, "", "x"]  # longer than any id held, empty, absent
    located = run.locate(wanted)
    assert set(located) == set(wanted)  # queries 25 and 26 are not in the run
    for qid, docs in wanted.items():
        assert located[qid].tolist() == run.ranking(qid).positions(docs).tolist(), qid
        ids = run.ids(qid)
        assert located[qid].tolist() == [ids.index(d) if d in ids else -1 for d in docs]
