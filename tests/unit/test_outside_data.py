"""The outside query sets stay what their provenance says they are."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_searcheval.collection.io import Problems
from pytest_searcheval.collection.native import (
    check_queries,
    read_corpus_files,
    read_manifest,
    read_queries_yaml,
)

ROOT = Path(__file__).resolve().parents[2]
FROZEN = ("id", "text", "class", "split", "source", "group", "constraints")
PARTS = {
    "dev": ("w1", "w2"),
    "final": ("w3", "w4"),
    "final2": ("w5", "w6"),
    "final3": ("w7", "w8"),
    "final4": ("w9", "w10"),
}
#: queries per class as written (a writer claim the judges overturned moves, see relabels.yaml)
WRITTEN = {
    "dev": {"no-result": 70, "vocabulary-mismatch": 70},
    "final": {"no-result": 70, "vocabulary-mismatch": 70},
    "final2": {"no-result": 50, "vocabulary-mismatch": 50, "constrained": 24, "payment-topic": 16},
    "final3": {"no-result": 50, "vocabulary-mismatch": 50, "constrained": 24, "payment-topic": 16},
    "final4": {
        "no-result": 50,
        "vocabulary-mismatch": 40,
        "constrained": 20,
        "payment-topic": 10,
        "typo": 20,
    },
}
RANKING_SYSTEMS = {
    "bm25-exact",
    "dense-exact",
    "char-tfidf",
    "engine-lexical",
    "engine-semantic",
    "engine-hybrid",
}
#: the final test of the relevance model also pooled its reranked profile
POOLED_ALSO = {"final3": {"engine-hybrid_rerank"}, "final4": {"engine-hybrid_rerank"}}


def _yaml(path: Path) -> object:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _writers(part: str) -> list[dict[str, object]]:
    entries: list[dict[str, object]] = []
    for writer in PARTS[part]:
        loaded = _yaml(ROOT / f"outside/writers/{writer}.yaml")
        assert isinstance(loaded, list)
        entries.extend(loaded)
    return entries


def test_generated_files_match_the_writers_files() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "construction/outside.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("part", sorted(PARTS))
def test_queries_are_unchanged_since_the_freeze(part: str) -> None:
    base = ROOT / "outside" / part
    queries = _yaml(base / "qrels/queries.yaml")
    assert isinstance(queries, list)
    frozen = [{key: query.get(key) for key in FROZEN} for query in queries]
    digest = hashlib.sha256(
        json.dumps(frozen, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    provenance = _yaml(base / "qrels/provenance.yaml")
    assert isinstance(provenance, dict)
    assert digest == provenance["queries"]["frozen_fields_sha256"]


@pytest.mark.parametrize("part", sorted(PARTS))
def test_queries_validate_against_the_shipped_corpus(part: str) -> None:
    base = ROOT / "outside" / part
    problems = Problems()
    manifest, assets = read_manifest(base / "collection.yaml", problems, base)
    documents, _ = read_corpus_files(sorted((base / "corpus").glob("*.jsonl")), base, problems)
    queries = check_queries(
        read_queries_yaml(base / "qrels/queries.yaml", base, problems),
        "qrels/queries.yaml",
        problems,
        splits=manifest["splits"],
        classes=manifest["classes"],
        assets=assets,
        documents=documents,
    )
    problems.raise_if_any()
    assert len(documents) == 525
    classes = sorted(q.query_class for q in queries.values())
    relabels = (
        _yaml(base / "qrels/relabels.yaml") if (base / "qrels/relabels.yaml").is_file() else {}
    )
    moved = len(relabels or {})
    # A writer claim the judges overturned moves from no-result to the answerable class.
    written = WRITTEN[part]
    assert classes.count("no-result") == written["no-result"] - moved
    assert classes.count("vocabulary-mismatch") == written["vocabulary-mismatch"] + moved
    for cls in set(written) - {"no-result", "vocabulary-mismatch"}:
        assert classes.count(cls) == written[cls]
    for q in queries.values():
        if q.query_class == "constrained":
            assert q.constraints, q.id
    assert {q.split for q in queries.values()} == set(manifest["splits"])
    assert all(q.id.split("-")[0] in PARTS[part] for q in queries.values())


@pytest.mark.parametrize("part", sorted(PARTS))
def test_every_query_is_pooled_from_every_system_and_its_target(part: str) -> None:
    base = ROOT / "outside" / part
    pool = json.loads((base / "qrels/pool.json").read_text(encoding="utf-8"))["pool"]
    writers = _writers(part)
    assert sorted(pool) == sorted(e["id"] for e in writers)
    for entry in writers:
        qid = str(entry["id"])
        found = {s for systems in pool[qid].values() for s in systems}
        # bm25 and char n-grams may find nothing for a query that shares no token with the catalog,
        # the engine's lexical profile nothing for a misspelt one (its misspelt words match no term)
        always = {"dense-exact", "engine-semantic", "engine-hybrid"}
        if entry["kind"] != "misspelt":
            always.add("engine-lexical")
        assert always <= found
        systems = RANKING_SYSTEMS | POOLED_ALSO.get(part, set())
        filtered = {f"{s}-filtered" for s in systems if s.startswith("engine-")}
        assert found <= systems | filtered | {"writer-target", "writer-capability"}
        assert POOLED_ALSO.get(part, set()) <= found
        if entry.get("filters"):  # the profiles under the labelled constraints pooled too
            assert "engine-hybrid-filtered" in found
        if entry["target"] is not None:
            assert "writer-target" in pool[qid][str(entry["target"])]
