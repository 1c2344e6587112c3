"""Admin writes racing searches: every search is served from one catalog version.

Writer threads flip one listing between a testnet-only and a pubnet-only payment option (each
version with a word of its own) and add keyword-stuffed copies of it, while reader threads
search with and without a ``network`` filter, with the interpreter's switch interval lowered so
that threads interleave inside the engine's loops. Checked on every answer:

- a result of a ``network=stellar:testnet`` search has a testnet option in the body served
  (filters are a restriction, also while an admin writes);
- a lexical result for one version's word carries that word in the body served (the postings
  and the body are of one version);
- no search raises (in the service, a 500).

Before searches read one catalog snapshot, a run like this one found filtered results served
with a pubnet-only body and ``RuntimeError: dictionary changed size during iteration``. The
embedder is the model-free double; PostgreSQL and the engine are real.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from embedding_doubles import HashEmbedder

from pytest_searcheval.collection import load
from pytest_searcheval.collection.model import Collection, Document
from pytest_searcheval.engine.core import Engine
from pytest_searcheval.engine.dense import DenseParams
from pytest_searcheval.engine.settings import EngineSettings
from pytest_searcheval.x402.synth import write_synthetic

N_DOCS = 120
#: the run lasts SECONDS, longer (up to MAX_SECONDS) on a machine too busy to reach MIN_RUNS
#: writes and reads of each kind by then, and stops early at MAX_WRITES
SECONDS = 8.0
MAX_SECONDS = 30.0
MIN_RUNS = 30
MAX_WRITES = 400
FLIP_ID = "flip-listing"
TESTNET = "stellar:testnet"
PUBNET = "stellar:pubnet"
#: one word per version: a lexical hit for it must carry it
WORD = {TESTNET: "zephyrwick", PUBNET: "quillborne"}
TITLE = "Flip Weather Quote"


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    root = write_synthetic(tmp_path_factory.mktemp("synth"), n_docs=N_DOCS, n_queries=4, files=1)
    return load(root)


@pytest.fixture(params=["exact", "hnsw"])
def engine(
    request: pytest.FixtureRequest,
    pg_server: Any,
    collection: Collection,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Engine]:
    """Both paths: an exact-scan catalog checks filters over every listing at once, an HNSW
    one (``exact_below`` under the catalog's size) checks the candidates one by one."""
    embedder = HashEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    settings = EngineSettings(no_result={})
    if request.param == "hnsw":
        settings = EngineSettings(
            no_result={}, dense=DenseParams(exact_below=N_DOCS // 2), recall_sample=0
        )
    with Engine.start(collection, dsn=pg_server.dsn, settings=settings, embedder=embedder) as eng:
        assert eng.hnsw == (request.param == "hnsw")
        yield eng


def _asset(collection: Collection, network: str) -> str:
    return next(a.address for a in collection.assets if a.network == network and a.code == "USDC")


def flip_version(collection: Collection, network: str) -> Document:
    """The flipped listing with one payment option, on ``network``, and that version's word."""
    base = next(iter(collection.documents.values()))
    assert base.x402 is not None
    option = dict(base.x402["accepts"][0], network=network, asset=_asset(collection, network))
    text = f"weather quote forecast {WORD[network]} daily"
    x402 = dict(base.x402, description=text, accepts=[option], resource="https://flip.example/q")
    return dataclasses.replace(base, id=FLIP_ID, title=TITLE, text=text, x402=x402)


def stuffed_copy(collection: Collection, n: int) -> Document:
    """A keyword-stuffed copy of the flipped listing (penalised; a near duplicate by title)."""
    doc = flip_version(collection, PUBNET)
    text = " ".join(["weather quote"] * 12)
    assert doc.x402 is not None
    x402 = dict(doc.x402, description=text, resource=f"https://stuffed{n}.example/q")
    return dataclasses.replace(doc, id=f"stuffed-{n:04d}", text=text, x402=x402)


def networks(body: dict[str, Any]) -> set[str]:
    return {str(o.get("network")) for o in body.get("accepts", []) if isinstance(o, dict)}


def run_race(engine: Engine, collection: Collection, *, seconds: float = SECONDS) -> dict[str, Any]:
    """Writers and readers for ``seconds`` (see ``MAX_SECONDS``, ``MAX_WRITES``); the tallies."""
    stop = threading.Event()
    violations: list[str] = []
    errors: list[str] = []
    reads = {"filtered": 0, "word": 0, "plain": 0}
    writes = [0]
    lock = threading.Lock()

    def guarded(step: Callable[[int], None]) -> Callable[[int], None]:
        def loop(worker: int) -> None:
            i = worker
            while not stop.is_set():
                try:
                    step(i)
                except Exception as exc:  # a 500 in the service: counted, not raised
                    with lock:
                        errors.append(f"{type(exc).__name__}: {exc}")
                i += 1

        return loop

    def filtered(i: int) -> None:
        profile = ("lexical", "semantic", "hybrid")[i % 3]
        body = engine.search(
            TITLE, profile=profile, limit=10, filters={"network": TESTNET}, extract=False
        )
        for row in body["results"]:
            if TESTNET not in networks(row["resource"]):
                with lock:
                    violations.append(f"{profile} network filter: {row['id']} {row['resource']}")
        with lock:
            reads["filtered"] += 1

    def word(i: int) -> None:
        wanted = WORD[(TESTNET, PUBNET)[i % 2]]
        body = engine.search(wanted, profile="lexical", limit=10, extract=False)
        for row in body["results"]:
            if wanted not in str(row["resource"].get("description", "")):
                with lock:
                    violations.append(f"lexical word {wanted}: {row['id']} {row['resource']}")
        with lock:
            reads["word"] += 1

    def plain(i: int) -> None:
        engine.search(f"{TITLE} {i % 7}", profile="hybrid", limit=10, extract=False)
        with lock:
            reads["plain"] += 1

    def flipper(i: int) -> None:
        if writes[0] >= MAX_WRITES:
            stop.set()
            return
        engine.upsert(flip_version(collection, (TESTNET, PUBNET)[i % 2]))
        with lock:
            writes[0] += 1

    def stuffer(i: int) -> None:
        if writes[0] >= MAX_WRITES:
            stop.set()
            return
        engine.upsert(stuffed_copy(collection, i % 40))
        with lock:
            writes[0] += 1

    engine.upsert(flip_version(collection, TESTNET))
    roles = [filtered, filtered, word, plain, flipper, stuffer]
    threads = [
        threading.Thread(target=guarded(role), args=(w,), daemon=True)
        for w, role in enumerate(roles)
    ]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        started = time.monotonic()
        stop.wait(seconds)
        while not stop.is_set() and time.monotonic() - started < MAX_SECONDS:
            with lock:
                enough = min(writes[0], *reads.values()) >= MIN_RUNS
            if enough:
                break
            stop.wait(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads), "a thread did not stop"
    return {"violations": violations, "errors": errors, "reads": reads, "writes": writes[0]}


def test_writes_racing_searches_serve_one_catalog_version(
    engine: Engine, collection: Collection
) -> None:
    started = time.monotonic()
    tally = run_race(engine, collection)
    reads = tally["reads"]
    kinds = Counter(v.split(":")[0] for v in tally["violations"])
    print(
        f"race: {tally['writes']} writes, reads {reads}, {time.monotonic() - started:.1f} s,"
        f" {len(tally['errors'])} raised, violations {dict(kinds)}"
    )
    assert min(tally["writes"], *reads.values()) >= MIN_RUNS, tally  # the race really ran
    errors, violations = tally["errors"], tally["violations"]
    assert (errors, violations) == ([], []), (
        f"{len(errors)} searches raised, {len(violations)} results broke a promise:"
        f" {errors[:3]} {violations[:3]}"
    )
    # Settled: the flipped listing answers as its last version says.
    last = engine.catalog.docs[FLIP_ID]
    body = engine.search(TITLE, profile="lexical", filters={"network": TESTNET}, extract=False)
    assert (FLIP_ID in [r["id"] for r in body["results"]]) == (TESTNET in networks(last.x402 or {}))
