"""Inputs that cannot hang or explode (point 5 of the issue "Reliability: stop cleanly, reindex
atomically, never 500, never trust a bad cache").

The hanging cases run ``collection check`` in a child process with a timeout, so a regression
fails the test instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_searcheval.collection import CollectionError, load
from pytest_searcheval.collection.io import Problems, iter_lines, read_yaml
from pytest_searcheval.x402.synth import write_synthetic

ROOT = Path(__file__).resolve().parents[2]

BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x]"]
    + [
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    + ["- id: q1"]
)


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    return write_synthetic(tmp_path / "c", n_docs=20, n_queries=4, judged_per_query=3, files=1)


def _check(root: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_searcheval.collection", "check", str(root)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def _replace_with_link(path: Path, target: str) -> None:
    path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize("which", ["corpus", "queries", "judgments", "manifest"])
def test_a_symlink_to_dev_zero_is_refused_not_read(collection: Path, which: str) -> None:
    path = {
        "corpus": next((collection / "corpus").glob("*.jsonl")),
        "queries": collection / "qrels" / "queries.yaml",
        "judgments": collection / "qrels" / "judgments.tsv",
        "manifest": collection / "collection.yaml",
    }[which]
    _replace_with_link(path, "/dev/zero")
    t0 = time.perf_counter()
    out = _check(collection)
    assert out.returncode != 0
    assert "is a character device: expected a regular file" in out.stdout + out.stderr
    assert time.perf_counter() - t0 < 30


def test_a_fifo_among_the_corpus_files_is_refused_without_waiting(collection: Path) -> None:
    os.mkfifo(collection / "corpus" / "zz-pipe.jsonl")
    out = _check(collection)
    assert out.returncode != 0
    assert "corpus/zz-pipe.jsonl: is a FIFO: expected a regular file" in out.stdout + out.stderr


def test_a_directory_named_like_a_corpus_file_is_refused(collection: Path) -> None:
    (collection / "corpus" / "zz-dir.jsonl").mkdir()
    with pytest.raises(CollectionError, match="is a directory: expected a regular file"):
        load(collection)


def test_an_alias_bomb_is_refused_in_well_under_a_second(collection: Path) -> None:
    (collection / "qrels" / "queries.yaml").write_text(BOMB.replace("- id: q1", "q: *i"))
    t0 = time.perf_counter()
    with pytest.raises(CollectionError, match="YAML aliases expand"):
        load(collection)
    assert time.perf_counter() - t0 < 1.0
    assert len(BOMB) < 1000  # ~0.7 KB that would expand to 9**9 scalars


def test_a_recursive_alias_is_refused(collection: Path) -> None:
    (collection / "qrels" / "queries.yaml").write_text("- &q\n  id: q1\n  self: *q\n")
    with pytest.raises(CollectionError, match="recursive YAML alias"):
        load(collection)


def test_a_few_anchors_reused_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("base: &b {a: 1, b: [1, 2, 3]}\none: *b\ntwo: *b\nthree: *b\n")
    problems = Problems()
    assert read_yaml(path, problems, "x.yaml") is not None and not problems


def test_size_limits_are_enforced_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("- a\n" * 1000)
    problems = Problems()
    assert read_yaml(path, problems, "big.yaml", max_bytes=100) is None
    assert "larger than the limit of 100 bytes" in problems.items[0].message
    lines = tmp_path / "big.tsv"
    lines.write_text("a\tb\n" * 1000)
    problems = Problems()
    assert list(iter_lines(lines, problems, "big.tsv", max_file_bytes=100)) == []
    assert "4000 bytes, larger than the limit of 100 bytes" in problems.items[0].message


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_json_nested_past_the_parser_is_a_problem_with_its_line(
    collection: Path, depth: int
) -> None:
    """The JSON decoder recurses per level: a line nested ~1,000 deep used to end the loader
    with a RecursionError instead of a problem naming the file and line."""
    corpus = next((collection / "corpus").glob("*.jsonl"))
    lines = corpus.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CollectionError) as info:
        load(collection)
    assert (
        f"corpus/{corpus.name}:3: malformed JSON: nested too deeply to parse"
        " (a record nests at most 32 levels of arrays and objects)"
    ) in str(info.value)
