"""One record check for the corpus loader and the engine's admin API (point 3 of the issue
"Reliability: stop cleanly, reindex atomically, never 500, never trust a bad cache").

Values that PostgreSQL or the engine cannot hold are refused where they enter: in a corpus file
with file, line and field, and (tests/engine/test_reliability_http.py) in a PUT body with a 400
naming the same field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.collection import CollectionError, load
from pytest_searcheval.collection.native import RecordError, checked_document
from pytest_searcheval.collection.records import MAX_DEPTH, value_problems
from pytest_searcheval.x402.synth import write_synthetic

GOOD = {"id": "d1", "title": "Weather", "text": "forecast"}

# (raw JSON of a corpus line, the field that must be named)
BAD_LINES: list[tuple[str, str]] = [
    ('{"id": "d1", "text": "t", "fields": {"x": NaN}}', "fields.x"),
    ('{"id": "d1", "text": "t", "fields": {"x": Infinity}}', "fields.x"),
    ('{"id": "d1", "text": "t", "fields": {"x": -Infinity}}', "fields.x"),
    ('{"id": "d1", "text": "t", "fields": {"x": 1e400}}', "fields.x"),
    (
        '{"id": "d1", "text": "t", "fields": {"x": [1, 2, 123456789012345678901234567890]}}',
        "fields.x[2]",
    ),
    ('{"id": "d1", "text": "t", "sidecar": {"settlements": true}}', "sidecar.settlements"),
    ('{"id": "d1", "text": "t", "sidecar": {"settlements": 99999999999}}', "sidecar.settlements"),
    ('{"id": "d1", "text": "t", "sidecar": {"settlements": -1}}', "sidecar.settlements"),
    ('{"id": "d1", "text": "t", "sidecar": {"settlements": 2.5}}', "sidecar.settlements"),
    ('{"id": "d1", "text": "t", "sidecar": {"liveness": {"a": 1}}}', "sidecar.liveness"),
    ('{"id": "d1", "text": "\\ud800"}', "text"),
    ('{"id": "d1", "text": "t", "fields": {"\\udfff": "v"}}', "fields.'\\udfff'"),
    ('{"id": "d1", "text": "a\\u0000b"}', "text"),
    ('{"id": "' + "x" * 300 + '", "text": "t"}', "id"),
    ('{"id": "d1", "text": "t", "fields": {"deep": ' + "[" * 40 + "]" * 40 + "}}", "fields.deep"),
]


def _corpus_with(tmp_path: Path, line: str) -> Path:
    root = write_synthetic(tmp_path / "c", n_docs=20, n_queries=4, judged_per_query=3, files=1)
    corpus = next((root / "corpus").glob("*.jsonl"))
    with corpus.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    return root


@pytest.mark.parametrize(("line", "field"), BAD_LINES, ids=[f for _, f in BAD_LINES])
def test_the_loader_refuses_values_the_engine_cannot_hold(
    tmp_path: Path, line: str, field: str
) -> None:
    root = _corpus_with(tmp_path, line)
    with pytest.raises(CollectionError) as info:
        load(root)
    problems = [p for p in info.value.problems if (p.field or "").startswith(field)]
    assert problems, [str(p) for p in info.value.problems]
    assert problems[0].file.startswith("corpus/") and problems[0].line == 21


@pytest.mark.parametrize(("line", "field"), BAD_LINES, ids=[f for _, f in BAD_LINES])
def test_the_api_check_is_the_loader_check(line: str, field: str) -> None:
    with pytest.raises(RecordError) as info:
        checked_document(json.loads(line))
    assert any((f or "").startswith(field) for f, _ in info.value.problems)


def test_a_good_record_passes_both() -> None:
    assert checked_document(GOOD).id == "d1"
    assert list(value_problems({**GOOD, "fields": {"n": 1.5, "big": 2**63 - 1, "ok": "é"}})) == []


def test_depth_is_checked_without_recursion() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert list(value_problems({"x": deep})) == [
        ("x" + "[0]" * (MAX_DEPTH - 1), f"nested deeper than {MAX_DEPTH} levels")
    ]


def test_unicode_digit_prices_are_refused(tmp_path: Path) -> None:
    root = write_synthetic(tmp_path / "c", n_docs=20, n_queries=4, judged_per_query=3, files=1)
    manifest = root / "collection.yaml"
    text = manifest.read_text(encoding="utf-8")
    old = 'usd: "1.00"'
    assert old in text
    manifest.write_text(text.replace(old, 'usd: "\u0661.00"', 1), encoding="utf-8")
    with pytest.raises(CollectionError, match=r"assets\[0\]\.usd"):
        load(root)
