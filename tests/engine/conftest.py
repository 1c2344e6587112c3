"""Tests of the reference engine: every test here needs the ``engine`` extra (PostgreSQL,
pgvector, the embedding model or the HTTP service) and is marked ``slow``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from embedding_doubles import HashEmbedder

from pytest_searcheval.collection import load
from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine.core import Engine, EngineSettings

_HERE = Path(__file__).parent
ROOT = _HERE.parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="module")
def shipped() -> Collection:
    return load(ROOT)


@pytest.fixture(scope="module")
def engine(pg_server: Any, shipped: Collection, tmp_path_factory: Any) -> Iterator[Engine]:
    """The shipped catalog on a model-free embedder, without a no-result rule; below
    ``exact_below`` (an exact dense scan, no HNSW index). A module with an ``engine`` of its
    own uses that one."""
    embedder = HashEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    settings = EngineSettings(no_result={})
    with Engine.start(shipped, dsn=pg_server.dsn, settings=settings, embedder=embedder) as eng:
        yield eng
