"""Reindex is atomic for readers (point 2 of the issue "Reliability: stop cleanly, reindex
atomically, never 500, never trust a bad cache").

Reader threads search an exact title over and over while the main thread deletes listings and
reindexes the catalog again and again. Every answer must hold the listing searched for: the
catalog is seen before a reindex or after it, never empty or half built. Deleted ids are never
served, before or after the purge. Before this was fixed, about a third of such searches came
back empty while a reindex ran. The embedder is the model-free double (the model is not under
test); PostgreSQL and the engine are real.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from embedding_doubles import HashEmbedder

from pytest_searcheval.collection import load
from pytest_searcheval.collection.model import Collection
from pytest_searcheval.engine.core import Engine
from pytest_searcheval.engine.settings import EngineSettings
from pytest_searcheval.x402.synth import write_synthetic

N_DOCS = 120
READERS = 4


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    root = write_synthetic(tmp_path_factory.mktemp("synth"), n_docs=N_DOCS, n_queries=6, files=1)
    return load(root)


@pytest.fixture
def engine(
    pg_server: Any, collection: Collection, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    embedder = HashEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    settings = EngineSettings(no_result={})
    with Engine.start(collection, dsn=pg_server.dsn, settings=settings, embedder=embedder) as eng:
        yield eng


def test_searches_during_reindex_see_the_whole_catalog(
    engine: Engine, collection: Collection
) -> None:
    docs = list(collection.documents.values())
    targets = [d for d in docs[:20] if d.title.strip()]
    doomed = [d.id for d in docs[-10:]]
    stop = threading.Event()
    answers: list[tuple[str, str, list[str]]] = []
    errors: list[BaseException] = []

    def read(worker: int) -> None:
        i = worker
        try:
            while not stop.is_set():
                doc = targets[i % len(targets)]
                profile = ("lexical", "hybrid")[i % 2]
                body = engine.search(doc.title, profile=profile, limit=10, extract=False)
                answers.append((doc.id, profile, [r["id"] for r in body["results"]]))
                i += READERS
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=read, args=(w,)) for w in range(READERS)]
    for t in threads:
        t.start()
    reindexes = 0
    try:
        time.sleep(0.2)
        for doc_id in doomed:
            engine.delete(doc_id)
            engine.reindex()
            reindexes += 1
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    during = len(answers)
    assert reindexes == len(doomed) and during > 50, (reindexes, during)
    empty = [(d, p) for d, p, ids in answers if not ids]
    assert empty == [], f"{len(empty)} of {during} searches found nothing during a reindex"
    missing = [(d, p, ids) for d, p, ids in answers if d not in ids]
    assert missing == [], f"{len(missing)} of {during} searches lost the listing searched for"
    served = {i for _, _, ids in answers for i in ids}
    # a doomed id may be served only before its delete; after the purge it is gone for good
    assert engine.describe()["documents"] == N_DOCS - len(doomed)
    for doc_id in doomed:
        body = engine.search(collection.documents[doc_id].title, profile="lexical", limit=50)
        assert doc_id not in [r["id"] for r in body["results"]]
    assert served  # the readers really ran against the catalog


def test_a_reindex_leaves_the_rankings_as_they_were(engine: Engine, collection: Collection) -> None:
    """Nothing to purge: the rebuilt catalog ranks exactly as the one it replaced."""
    queries = [q.text for q in collection.queries.values()]
    before = [
        engine.search(q, profile=p)["results"] for q in queries for p in ("lexical", "hybrid")
    ]
    engine.reindex()
    after = [engine.search(q, profile=p)["results"] for q in queries for p in ("lexical", "hybrid")]
    assert after == before
