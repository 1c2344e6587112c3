"""The packaged relevance model (engine/relevance.py) in the engine: loaded with no download, the
default reranker of ``hybrid_rerank`` on the shipped catalog, its evidence in the empty answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine import relevance
from pytest_searcheval.engine.core import Engine, EngineSettings
from pytest_searcheval.engine.rerank import Reranker


@pytest.fixture(scope="module")
def real(pg_server: Any, shipped: Collection) -> Iterator[Engine]:
    """The shipped catalog with the packaged model and the default reranker, no cut."""
    with Engine.start(shipped, dsn=pg_server.dsn, settings=EngineSettings(no_result={})) as eng:
        yield eng


def test_the_packaged_model_ships_small_and_loads_to_its_manifests_probe() -> None:
    path = relevance.packaged_path()
    assert path is not None
    assert sum(f.stat().st_size for f in path.iterdir()) < 25 * 2**20
    manifest = json.loads((path / relevance.MANIFEST).read_text())
    encoder = relevance.QueryEncoder(path)
    from sentence_transformers import SentenceTransformer

    from pytest_searcheval.engine.embed import default_model_path

    base = SentenceTransformer(str(default_model_path()), device="cpu")
    probes = [
        "weather forecast for my delivery route tomorrow",
        "turn a scanned invoice into structured fields",
        "book a table at a restaurant near me tonight",
    ]
    tuned = encoder.encode(probes)
    frozen = base.encode(probes, normalize_embeddings=True)
    # the adapter is applied: the query vectors moved, and not by a little
    assert float(np.min(np.sum(tuned * frozen, axis=1))) < 0.99
    assert manifest["inputs"]["corpus/catalog.jsonl"]
    assert manifest["vectors"].startswith("sentence-transformers/all-MiniLM-L6-v2@")


def test_hybrid_rerank_is_the_relevance_model_on_the_shipped_catalog(real: Engine) -> None:
    assert real.profiles()["hybrid_rerank"] is None
    assert real.describe()["reranker"]["kind"] == "relevance-model"
    body = real.search(
        "my parcels keep getting soaked, will it rain on the route", profile="hybrid_rerank"
    )
    hybrid = real.search(
        "my parcels keep getting soaked, will it rain on the route", profile="hybrid"
    )
    head = {r["id"] for r in hybrid["results"]}
    assert body["results"] and isinstance(body["confidence"]["rerank"], float)
    assert -1.0 <= body["confidence"]["rerank"] <= 1.0
    # the head is reordered, not replaced: the reranked top 10 comes from hybrid's top 30
    deep = real.search(
        "my parcels keep getting soaked, will it rain on the route", profile="hybrid", limit=30
    )
    assert {r["id"] for r in body["results"]} <= {r["id"] for r in deep["results"]}
    assert head  # hybrid answered too


def test_the_rerank_evidence_is_the_best_score_among_listings_a_filter_keeps(
    real: Engine,
) -> None:
    text = "an api that tells me the air quality where our drivers are"
    wide = real.search(text, profile="hybrid_rerank", apply_threshold=False, extract=False)
    narrow = real.search(
        text,
        profile="hybrid_rerank",
        apply_threshold=False,
        extract=False,
        filters={"type": "mcp"},
    )
    w, n = wide["confidence"]["rerank"], narrow["confidence"]["rerank"]
    assert w is not None
    assert n is None or n <= w + 1e-9  # a filter can only lower the evidence


def test_turning_reranking_off_and_a_foreign_embedder_are_named() -> None:
    off = Reranker(Path("none"))
    assert off.unavailable is not None and "off" in off.unavailable
    path = relevance.packaged_path()
    assert path is not None
    foreign = Reranker(path, vectors=lambda texts: [], space="other-model@abc")
    assert foreign.unavailable is not None and "other-model@abc" in foreign.unavailable
    assert Reranker(path).unavailable is not None  # no vectors to score against
