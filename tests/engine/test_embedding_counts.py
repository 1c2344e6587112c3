"""Embedding completeness: the engine counts listings whose embedding failed, after the seed,
admin writes and a reindex, and serves the counts in ``/healthz`` (what the plugin's targets
read into ``quality.embeddings``). The encoder is a double that fails on chosen texts; the
database and the HTTP service are real."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from embedding_doubles import FailingEmbedder
from fastapi.testclient import TestClient

from pytest_searcheval.collection import load
from pytest_searcheval.engine.app import create_app
from pytest_searcheval.engine.core import Engine
from pytest_searcheval.engine.documents import document_from_record, embedding_text
from pytest_searcheval.engine.settings import EngineSettings
from pytest_searcheval.x402.synth import write_synthetic

TOKEN = "counts-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
N_DOCS = 30


@pytest.fixture(scope="module")
def collection_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic(tmp_path_factory.mktemp("synth"), n_docs=N_DOCS, n_queries=4, files=1)


@pytest.fixture(scope="module")
def records(collection_dir: Path) -> list[dict[str, Any]]:
    lines = next((collection_dir / "corpus").glob("*.jsonl")).read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture
def served(
    pg_server: Any,
    collection_dir: Path,
    records: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Engine, FailingEmbedder, TestClient]]:
    """An engine whose first listing's embedding fails at the seed (RuntimeError)."""
    embedder = FailingEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    embedder.poison.add(embedding_text(document_from_record(records[0])))
    collection = load(collection_dir)
    settings = EngineSettings(no_result={})
    with (
        Engine.start(collection, dsn=pg_server.dsn, settings=settings, embedder=embedder) as eng,
        TestClient(create_app(eng, admin_token=TOKEN), raise_server_exceptions=False) as client,
    ):
        yield eng, embedder, client


def counts(client: TestClient) -> dict[str, Any]:
    r = client.get("/healthz")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()["embeddings"]
    return body


def stored_live(engine: Engine) -> int:
    value: int = engine.describe()["embeddings"]["stored_live"]
    return value


def test_a_failed_embedding_is_counted_and_served_over_http(
    served: tuple[Engine, FailingEmbedder, TestClient],
) -> None:
    engine, _, client = served
    seeded = counts(client)
    assert {k: seeded[k] for k in ("listings", "embedded", "failed", "fallback", "reasons")} == {
        "listings": N_DOCS,
        "embedded": N_DOCS - 1,
        "failed": 1,
        "fallback": 1,
        "reasons": {"RuntimeError": 1},
    }
    assert seeded["last_write"] == {
        "operation": "seed",
        "listings": N_DOCS,
        "embedded": N_DOCS - 1,
        "failed": 1,
        "reasons": {"RuntimeError": 1},
    }
    # the counts the writes keep are the stored rows
    assert stored_live(engine) == seeded["embedded"]
    described = engine.describe()["embeddings"]
    assert {k: described[k] for k in seeded} == seeded


def test_admin_writes_and_a_reindex_keep_the_counts_exact(
    served: tuple[Engine, FailingEmbedder, TestClient], records: list[dict[str, Any]]
) -> None:
    engine, embedder, client = served
    # a second listing fails on its upsert (another reason class)
    embedder.error = ValueError
    changed = dict(records[1], text=records[1]["text"] + " recalibrated")
    embedder.poison.add(embedding_text(document_from_record(changed)))
    assert client.put(f"/admin/resources/{changed['id']}", json=changed, headers=AUTH).is_success
    after_put = counts(client)
    assert (after_put["failed"], after_put["fallback"], after_put["embedded"]) == (2, 2, N_DOCS - 2)
    assert after_put["reasons"] == {"RuntimeError": 1, "ValueError": 1}
    assert after_put["last_write"] == {
        "operation": "upsert",
        "listings": 1,
        "embedded": 0,
        "failed": 1,
        "reasons": {"ValueError": 1},
    }
    assert stored_live(engine) == N_DOCS - 2
    # the first listing's text now encodes: its upsert clears its failure
    embedder.poison.discard(embedding_text(document_from_record(records[0])))
    assert client.put(
        f"/admin/resources/{records[0]['id']}", json=records[0], headers=AUTH
    ).is_success
    assert counts(client)["reasons"] == {"ValueError": 1}
    # a tombstoned listing leaves the counts
    assert client.delete(f"/admin/resources/{changed['id']}", headers=AUTH).is_success
    deleted = counts(client)
    assert (deleted["listings"], deleted["embedded"], deleted["failed"]) == (N_DOCS - 1,) * 2 + (0,)
    assert deleted["reasons"] == {}
    # a reindex re-embeds every live listing (cached vectors are reused; a failure is not
    # cached): a listing whose text still fails is counted again, one that encodes is not
    embedder.error = RuntimeError
    failing = dict(records[2], text=records[2]["text"] + " unencodable")
    embedder.poison.add(embedding_text(document_from_record(failing)))
    assert client.put(f"/admin/resources/{failing['id']}", json=failing, headers=AUTH).is_success
    assert client.post("/admin/reindex", headers=AUTH).is_success
    rebuilt = counts(client)
    assert {k: rebuilt[k] for k in ("listings", "embedded", "failed", "reasons")} == {
        "listings": N_DOCS - 1,
        "embedded": N_DOCS - 2,
        "failed": 1,
        "reasons": {"RuntimeError": 1},
    }
    assert rebuilt["last_write"] == {
        "operation": "reindex",
        "listings": N_DOCS - 1,
        "embedded": N_DOCS - 2,
        "failed": 1,
        "reasons": {"RuntimeError": 1},
    }
    assert stored_live(engine) == N_DOCS - 2
    embedder.poison.clear()
    assert client.post("/admin/reindex", headers=AUTH).is_success
    assert counts(client)["failed"] == 0
    assert stored_live(engine) == N_DOCS - 1


def test_a_scratch_copy_counts_its_own_writes(
    served: tuple[Engine, FailingEmbedder, TestClient], records: list[dict[str, Any]]
) -> None:
    engine, embedder, _ = served
    copy = engine.scratch()
    try:
        assert copy.embedding_counts() == engine.embedding_counts()
        embedder.poison.discard(embedding_text(document_from_record(records[0])))
        copy.upsert(records[0])
        assert copy.embedding_counts()["failed"] == 0
        assert stored_live(copy) == N_DOCS
    finally:
        copy.close()
    assert engine.embedding_counts()["failed"] == 1


def test_semantic_search_is_unavailable_only_while_no_listing_has_an_embedding(
    pg_server: Any,
    collection_dir: Path,
    records: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    embedder = FailingEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    embedder.poison.update(embedding_text(document_from_record(r)) for r in records)
    settings = EngineSettings(no_result={})
    collection = load(collection_dir)
    with Engine.start(collection, dsn=pg_server.dsn, settings=settings, embedder=embedder) as eng:
        assert eng.embedding_counts()["failed"] == N_DOCS
        assert eng.profiles()["semantic"] == "every document embedding failed"
        # the texts encode now: a reindex embeds them, and semantic search serves again
        embedder.poison.clear()
        eng.reindex()
        assert eng.embedding_counts()["embedded"] == N_DOCS
        assert eng.profiles()["semantic"] is None
        assert eng.profiles()["hybrid"] is None
