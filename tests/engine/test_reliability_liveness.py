"""Run liveness that two machines with one hostname cannot confuse.

Two machines with the same hostname and pid namespace (two containers started from one image,
say) sharing a ``--dsn`` read each other's schema markers as their own: a pid that names no
process here may be a live run there. Before the run's lease, the stale cleanup of one took the
other's live schema for dead and dropped it; the other then answered 500. The second machine is
simulated by what it writes: a live run whose marker carries our hostname and pid namespace and
a pid that is dead on this machine. PostgreSQL is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pytest_searcheval.engine import isolation, lifecycle
from pytest_searcheval.engine.isolation import IsolatedSchema, drop_stale_schemas


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _pose_as_another_machine(dsn: str, schema: str) -> dict[str, Any]:
    """Rewrite the marker of ``schema`` as a run on a machine with our hostname and pid
    namespace writes it: its pid is dead here."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
            (schema,),
        ).fetchone()
        assert row is not None
        marker = json.loads(row[0])
        marker.update(pid=_dead_pid(), pid_started=None)
        conn.execute(
            sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                sql.Identifier(schema), sql.Literal(json.dumps(marker))
            )
        )
    return dict(marker)


def _exists(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (schema,)).fetchone()
    return bool(row and row[0])


def test_a_live_run_with_our_hostname_and_a_pid_dead_here_is_left_alone(pg_server: Any) -> None:
    dsn = pg_server.dsn
    with IsolatedSchema(dsn, clean_stale=False, heartbeat_seconds=None) as victim:
        with victim.connection() as conn:
            conn.execute("INSERT INTO documents (id) VALUES ('mine')")
        marker = _pose_as_another_machine(dsn, victim.name)
        # the marker alone reads as a dead run of this machine's
        assert not isolation._pid_alive(marker["pid"], None)
        with psycopg.connect(dsn, autocommit=True) as conn:
            dropped = drop_stale_schemas(conn)
        assert victim.name not in dropped and _exists(dsn, victim.name)
        with victim.connection() as conn:
            row = conn.execute("SELECT count(*) FROM documents").fetchone()
        assert row == (1,)
    assert not _exists(dsn, victim.name)


def test_once_its_session_ends_the_run_is_cleaned_up(pg_server: Any) -> None:
    """The lease proves life only while its session lasts: a run whose session is gone (the
    process died) and whose marker reads as dead is dropped by the next cleaner."""
    dsn = pg_server.dsn
    victim = IsolatedSchema(dsn, clean_stale=False, heartbeat_seconds=None).open()
    try:
        _pose_as_another_machine(dsn, victim.name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert victim.name not in drop_stale_schemas(conn)
            # what the death of its process does to its lease session
            assert victim._lease is not None
            conn.execute("SELECT pg_terminate_backend(%s)", (victim._lease.info.backend_pid,))
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(50):
                dropped = drop_stale_schemas(conn)
                if victim.name in dropped:
                    break
        assert victim.name in dropped and not _exists(dsn, victim.name)
    finally:
        victim._created = False  # dropped by the cleaner: nothing of it is left to drop
        victim.close()


def test_a_lost_lease_session_is_taken_again(pg_server: Any, monkeypatch: Any) -> None:
    """A restarted or partitioned server ends the lease session of a live run: the run takes
    its lock again within ``LEASE_CHECK_SECONDS``, so the window in which only its marker
    speaks for it is that short."""
    monkeypatch.setattr(isolation, "LEASE_CHECK_SECONDS", 0.1)
    dsn = pg_server.dsn
    key = isolation.run_lock_key
    with IsolatedSchema(dsn, clean_stale=False) as run:
        assert run._lease is not None
        first = run._lease.info.backend_pid
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (first,))
            held = False
            for _ in range(100):
                time.sleep(0.05)
                row = conn.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                    " WHERE l.locktype = 'advisory' AND l.granted AND a.pid <> %s"
                    " AND (l.classid::bigint << 32 | l.objid::bigint)"
                    " = hashtextextended(%s, 0)",
                    (first, key(run.name)),
                ).fetchone()
                if row and row[0]:
                    held = True
                    break
        assert held, "the lease was not taken again"
        assert run._lease.info.backend_pid != first


def test_a_server_directory_whose_owner_holds_its_lease_is_not_reaped(tmp_path: Path) -> None:
    """The embedded server's temporary directory, in a temp directory two machines with one
    hostname share: the other machine's live run holds the directory's lease (a second process
    here), while its owner file names a pid that is dead on this machine."""
    twin = tmp_path / f"{lifecycle.SERVER_DIR_PREFIX}twin"
    twin.mkdir()
    code = (
        "import sys, time, pathlib\n"
        "from pytest_searcheval.engine import lifecycle\n"
        f"lifecycle.write_owner(pathlib.Path({str(twin)!r}))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    holder = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        owner = json.loads((twin / lifecycle.OWNER_FILE).read_text())
        owner.update(pid=_dead_pid(), pid_started=None)
        (twin / lifecycle.OWNER_FILE).write_text(json.dumps(owner))
        assert lifecycle.reap_dead_servers(tmp_path) == [] and twin.is_dir()
    finally:
        holder.kill()
        holder.wait()
    # its process gone, the lease is free: the next start removes the directory
    (done,) = lifecycle.reap_dead_servers(tmp_path)
    assert done.startswith(str(twin)) and not twin.exists()


def test_health_fails_when_the_run_schema_is_gone(
    pg_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A schema dropped behind a live engine's back (by a cleaner fooled as above, or by hand)
    makes every search fail: ``/healthz`` must not answer ok then."""
    from embedding_doubles import HashEmbedder

    from pytest_searcheval.collection import load
    from pytest_searcheval.engine.core import Engine
    from pytest_searcheval.engine.settings import EngineSettings
    from pytest_searcheval.x402.synth import write_synthetic

    root = write_synthetic(tmp_path_factory.mktemp("synth"), n_docs=12, n_queries=2, files=1)
    embedder = HashEmbedder(cache_dir=tmp_path_factory.mktemp("cache"))
    settings = EngineSettings(no_result={})
    with Engine.start(load(root), dsn=pg_server.dsn, settings=settings, embedder=embedder) as eng:
        assert eng.health()["documents"] == 12
        with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(eng.schema_name)))
        with pytest.raises(isolation.IsolationError, match="is gone"):
            eng.health()
