"""Run isolation: each property the design promises (a random schema, proven ownership, a drop at
the end), proven against a database.

A pre-existing "user" database (several schemas, tables with thousands of rows, a table named
like ours in ``public`` and an unmarked schema named with our prefix) is built once as a template
database with pytest-postgresql's ``DatabaseJanitor`` and cloned per test (``CREATE DATABASE ...
TEMPLATE``, a file copy, ~20 ms), so tests that write never share state.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pytest_postgresql.janitor import DatabaseJanitor

from pytest_searcheval.engine import isolation
from pytest_searcheval.engine import migrate as migrate_mod
from pytest_searcheval.engine.db import EmbeddedServer, ExternalServer
from pytest_searcheval.engine.isolation import (
    IsolatedSchema,
    IsolationError,
    assert_own_schema,
    drop_own_schema,
    drop_stale_schemas,
)

REPO = Path(__file__).resolve().parents[2]
# roles are cluster-wide: unique per process, so xdist workers sharing one server never collide
INTRUDER = f"searcheval_test_intruder_{uuid.uuid4().hex[:8]}"


def _janitor(dsn: str, dbname: str, **kwargs: Any) -> DatabaseJanitor:
    info = conninfo_to_dict(dsn)
    return DatabaseJanitor(
        user=str(info.get("user", "postgres")),
        password=str(info["password"]) if info.get("password") else None,
        host=str(info.get("host", "localhost")),
        port=str(info.get("port", 5432)),
        dbname=dbname,
        maintenance_dbname=str(info.get("dbname", "postgres")),
        **kwargs,
    )


def _load_catalog(conn: psycopg.Connection[Any]) -> None:
    """The user's own data: must come out of every run byte for byte unchanged."""
    conn.execute(
        """
        CREATE EXTENSION IF NOT EXISTS vector;
        CREATE SCHEMA shop;
        CREATE TABLE shop.customers (id int PRIMARY KEY, name text, email text);
        INSERT INTO shop.customers
             SELECT g, 'customer ' || g, 'c' || g || '@shop.example'
               FROM generate_series(1, 2000) g;
        CREATE TABLE shop.orders (id int PRIMARY KEY, customer int REFERENCES shop.customers,
                                  amount numeric(12, 2), meta jsonb);
        INSERT INTO shop.orders
             SELECT g, 1 + g % 2000, (g * 7 % 1000) / 10.0, jsonb_build_object('n', g)
               FROM generate_series(1, 5000) g;
        CREATE VIEW shop.big_orders AS SELECT * FROM shop.orders WHERE amount > 50;
        -- a configured catalog that looks like ours: our prefix, our table names, no marker
        CREATE SCHEMA searcheval_catalog;
        CREATE TABLE searcheval_catalog.documents (id text PRIMARY KEY, title text, body text);
        INSERT INTO searcheval_catalog.documents
             SELECT 'doc-' || g, 'title ' || g, repeat('body ', g % 20)
               FROM generate_series(1, 3000) g;
        CREATE TABLE searcheval_catalog.schema_migrations (version int PRIMARY KEY);
        INSERT INTO searcheval_catalog.schema_migrations VALUES (1);
        -- prefix plus a comment that is not our marker
        CREATE SCHEMA searcheval_0123456789abcdef;
        COMMENT ON SCHEMA searcheval_0123456789abcdef IS '{"tool": "someone-else", "pid": 1}';
        CREATE TABLE searcheval_0123456789abcdef.terms (doc_id text, term text);
        INSERT INTO searcheval_0123456789abcdef.terms
             SELECT 'doc-' || g, 'term' || g FROM generate_series(1, 1500) g;
        -- tables named like ours where a wrong search_path would land
        CREATE TABLE public.documents (id text PRIMARY KEY, title text);
        INSERT INTO public.documents
             SELECT 'p' || g, 'public ' || g FROM generate_series(1, 1000) g;
        CREATE TABLE public.engine_meta (key text PRIMARY KEY, value jsonb);
        INSERT INTO public.engine_meta VALUES ('owner', '"the user"');
        """
    )


def _marked_schemas(conn: psycopg.Connection[Any]) -> list[str]:
    """Schemas carrying a pytest-searcheval marker (created by some run)."""
    rows = conn.execute(
        "SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace ORDER BY 1"
    ).fetchall()
    return [str(name) for name, comment in rows if isolation.read_marker(comment) is not None]


def _snapshot(dsn: str) -> dict[str, Any]:
    """Row count + md5 of every table and view outside run schemas, and every schema's
    name, owner and comment."""
    with psycopg.connect(dsn) as conn:
        runs = _marked_schemas(conn)
        tables = conn.execute(
            "SELECT n.nspname, c.relname FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'v', 'm') AND n.nspname <> ALL(%s) "
            "AND n.nspname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2",
            (runs,),
        ).fetchall()
        out: dict[str, Any] = {}
        for schema, table in tables:
            query = sql.SQL(
                "SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
                "FROM {}.{} t"
            ).format(sql.Identifier(schema), sql.Identifier(table))
            out[f"{schema}.{table}"] = conn.execute(query).fetchone()
        out["schemas"] = conn.execute(
            "SELECT nspname, pg_get_userbyid(nspowner), obj_description(oid, 'pg_namespace') "
            "FROM pg_namespace WHERE nspname <> ALL(%s) ORDER BY 1",
            (runs,),
        ).fetchall()
    assert out["shop.orders"][0] == 5000  # the snapshot really sees the user's data
    return out


def _run_schemas(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return _marked_schemas(conn)


@pytest.fixture(scope="module")
def catalog_template(pg_server: EmbeddedServer | ExternalServer) -> Iterator[str]:
    name = f"searcheval_tpl_{uuid.uuid4().hex[:8]}"
    janitor = _janitor(pg_server.dsn, name, as_template=True)
    janitor.init()
    created_role = False
    try:
        with psycopg.connect(make_conninfo(pg_server.dsn, dbname=name), autocommit=True) as conn:
            _load_catalog(conn)
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (INTRUDER,))
            if exists.fetchone() is None:
                conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(INTRUDER)))
                created_role = True
        yield name
    finally:
        janitor.drop()
        if created_role:  # roles are cluster-wide: leave an external server as we found it
            with psycopg.connect(pg_server.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(INTRUDER)))


@pytest.fixture
def catalog_dsn(pg_server: EmbeddedServer | ExternalServer, catalog_template: str) -> Iterator[str]:
    """DSN of a fresh clone of the user database (pytest-postgresql janitor, template clone)."""
    name = f"searcheval_db_{uuid.uuid4().hex[:8]}"
    janitor = _janitor(pg_server.dsn, name, template_dbname=catalog_template)
    janitor.init()
    try:
        yield make_conninfo(pg_server.dsn, dbname=name)
    finally:
        janitor.drop()


def _seed(iso: IsolatedSchema, n: int = 50) -> None:
    with iso.connection() as conn:
        conn.execute(
            "INSERT INTO documents (id, title, body) "
            "SELECT 'd' || g, 'title ' || g, 'body ' || g FROM generate_series(1, %s) g",
            (n,),
        )
        conn.execute(
            "INSERT INTO terms (doc_id, field, term, tf) "
            "SELECT id, 'title', 'title', 1 FROM documents"
        )
        conn.execute("INSERT INTO engine_meta VALUES ('seeded', 'true')")


# --- the marker and search_path -------------------------------------------------------------


def test_schema_is_marked_and_every_pooled_connection_uses_it(catalog_dsn: str) -> None:
    with IsolatedSchema(catalog_dsn, pool_min=3, pool_max=3) as iso:
        assert iso.name.startswith("searcheval_") and len(iso.name) == len("searcheval_") + 16
        with psycopg.connect(catalog_dsn) as conn:
            row = conn.execute(
                "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
                (iso.name,),
            ).fetchone()
        assert row is not None
        marker = json.loads(row[0])
        assert marker["tool"] == "pytest-searcheval"
        assert marker["run_id"] == iso.run_id
        assert marker["pid"] == os.getpid()
        assert marker["host"] == socket.gethostname()
        assert "version" in marker
        assert datetime.now(UTC) - datetime.fromisoformat(marker["created_at"]) < timedelta(
            minutes=5
        )
        facts = iso.describe()
        assert facts["schema"] == iso.name and facts["params"] == {"embedding_dim": 384}
        assert facts["search_path"].startswith(f'"{iso.name}"')
        _seed(iso, 7)
        # hold every pooled connection at once, so each one is checked, not the same one 3 times
        with iso.connection() as a, iso.connection() as b, iso.connection() as c:
            pids = set()
            for conn in (a, b, c):
                got = conn.execute("SELECT current_schema(), pg_backend_pid()").fetchone()
                assert got is not None and got[0] == iso.name
                pids.add(got[1])
                # unqualified names reach our table, not public.documents (1000 rows)
                assert conn.execute("SELECT count(*) FROM documents").fetchone() == (7,)
            assert len(pids) == 3
        # connections the pool opens later (after losing these) are configured too
        with psycopg.connect(catalog_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) p", (list(pids),))
        iso.pool.check()
        with iso.connection() as conn:
            got = conn.execute("SELECT current_schema(), pg_backend_pid()").fetchone()
            assert got is not None and got[0] == iso.name and got[1] not in pids


def test_a_borrower_changing_search_path_does_not_leak_to_the_next(catalog_dsn: str) -> None:
    with IsolatedSchema(catalog_dsn, pool_min=1, pool_max=1) as iso:
        with iso.connection() as conn:
            first = conn.execute("SELECT pg_backend_pid()").fetchone()
            conn.execute("SET search_path TO public")
            assert conn.execute("SELECT count(*) FROM documents").fetchone() == (1000,)
        with iso.connection() as conn:
            row = conn.execute("SELECT current_schema(), pg_backend_pid()").fetchone()
            assert row is not None and row[0] == iso.name
            assert (row[1],) == first  # the same connection, repaired, not a new one
            assert conn.execute("SELECT count(*) FROM documents").fetchone() == (0,)


def test_heartbeat_keeps_the_marker_fresh(catalog_dsn: str) -> None:
    with IsolatedSchema(catalog_dsn, heartbeat_seconds=0.05) as iso:
        deadline = time.monotonic() + 10
        while True:
            with psycopg.connect(catalog_dsn) as conn:
                row = conn.execute(
                    "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace "
                    "WHERE nspname = %s",
                    (iso.name,),
                ).fetchone()
            assert row is not None
            marker = json.loads(row[0])
            if marker["heartbeat_at"] > marker["created_at"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert marker["heartbeat_at"] > marker["created_at"]
        assert marker["run_id"] == iso.run_id
    assert _run_schemas(catalog_dsn) == []


# --- drop at the end, also after an exception -----------------------------------------------


def test_schema_dropped_after_exception(catalog_dsn: str) -> None:
    iso = IsolatedSchema(catalog_dsn)
    with pytest.raises(RuntimeError, match="boom"), iso:
        _seed(iso)
        assert _run_schemas(catalog_dsn) == [iso.name]
        raise RuntimeError("boom")
    assert _run_schemas(catalog_dsn) == []


def test_forgotten_close_still_drops_at_interpreter_exit(catalog_dsn: str) -> None:
    code = (
        "from pytest_searcheval.engine.isolation import IsolatedSchema\n"
        f"iso = IsolatedSchema({catalog_dsn!r}).open()\n"
        "print(iso.name)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("searcheval_")
    assert _run_schemas(catalog_dsn) == []


# --- proof of ownership before seeding ------------------------------------------------------

INJECTIONS: dict[str, tuple[str, str]] = {
    "foreign table": (
        "CREATE FOREIGN DATA WRAPPER fdw_{tag}; CREATE SERVER srv_{tag} FOREIGN DATA WRAPPER "
        "fdw_{tag}; CREATE FOREIGN TABLE {s}.remote_docs (id text) SERVER srv_{tag}",
        "foreign table {s}.remote_docs",
    ),
    "table owned by another role": (
        f"ALTER TABLE {{s}}.payment_options OWNER TO {INTRUDER}",
        f"table {{s}}.payment_options is owned by {INTRUDER}",
    ),
    "unexpected table": (
        "CREATE TABLE {s}.stray (x int)",
        "table {s}.stray (owner postgres) was not created by our migrations",
    ),
    "view in place of a table": (
        "DROP TABLE {s}.extensions; CREATE VIEW {s}.extensions AS SELECT 1 AS x",
        "{s}.extensions is a view, expected a table",
    ),
    "trigger redirecting writes": (
        "CREATE FUNCTION public.fwd_{tag}() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RETURN NEW; END $$; CREATE TRIGGER fwd BEFORE INSERT ON {s}.documents "
        "FOR EACH ROW EXECUTE FUNCTION public.fwd_{tag}()",
        "trigger fwd on documents",
    ),
    "rule redirecting writes": (
        "CREATE RULE redirect AS ON INSERT TO {s}.terms DO INSTEAD "
        "INSERT INTO public.engine_meta VALUES (NEW.term, '1')",
        "rule redirect on terms",
    ),
    "another role may create objects": (
        f"GRANT CREATE ON SCHEMA {{s}} TO {INTRUDER}",
        "another role holds CREATE on schema",
    ),
}


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
def test_abort_before_seeding_when_ownership_cannot_be_proven(
    kind: str, catalog_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _snapshot(catalog_dsn)
    inject, expected = INJECTIONS[kind]
    real_migrate = migrate_mod.migrate
    tag = uuid.uuid4().hex[:8]

    def migrate_then_tamper(conn: psycopg.Connection[Any], schema: str, **kw: Any) -> list[int]:
        applied = real_migrate(conn, schema, **kw)
        conn.execute(inject.format(s=schema, tag=tag).encode())
        return applied

    monkeypatch.setattr(migrate_mod, "migrate", migrate_then_tamper)
    iso = IsolatedSchema(catalog_dsn)
    seeded = False
    with pytest.raises(IsolationError) as info, iso:
        seeded = True  # never reached: open() raised
    message = str(info.value)
    assert "aborting before seeding" in message
    assert expected.format(s=iso.name) in message
    assert not seeded
    assert _run_schemas(catalog_dsn) == []
    assert _snapshot(catalog_dsn) == before


# --- never write a schema this run did not create -------------------------------------------


def test_refuses_to_write_schemas_it_did_not_create(catalog_dsn: str) -> None:
    with IsolatedSchema(catalog_dsn) as mine, IsolatedSchema(catalog_dsn) as other:
        with psycopg.connect(catalog_dsn, autocommit=True) as conn:
            assert_own_schema(conn, mine.name, mine.run_id)
            for schema in ("public", "searcheval_catalog", "searcheval_0123456789abcdef"):
                with pytest.raises(IsolationError, match="not created by this run"):
                    assert_own_schema(conn, schema, mine.run_id)
                with pytest.raises(IsolationError, match="does not carry our marker"):
                    drop_own_schema(conn, schema, mine.run_id)
            # another live run's schema is not ours either
            with pytest.raises(IsolationError, match="not created by this run"):
                assert_own_schema(conn, other.name, mine.run_id)
            with pytest.raises(IsolationError, match="does not carry our marker"):
                drop_own_schema(conn, other.name, mine.run_id)
        assert other.name in _run_schemas(catalog_dsn)


FOREIGN_DEPENDENTS = {
    "view": (
        "CREATE VIEW shop.peek AS SELECT id FROM {s}.documents",
        r"view shop\.peek",
        "DROP VIEW shop.peek",
    ),
    "foreign key": (
        "CREATE TABLE shop.refs (doc text REFERENCES {s}.documents)",
        r"constraint refs_doc_fkey on table shop\.refs",
        "DROP TABLE shop.refs",
    ),
    "publication": (
        "CREATE PUBLICATION pub_docs FOR TABLE {s}.documents",
        r"publication of table .*documents in publication pub_docs",
        "DROP PUBLICATION pub_docs",
    ),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN_DEPENDENTS))
def test_drop_refuses_cascade_into_foreign_objects(catalog_dsn: str, kind: str) -> None:
    before = _snapshot(catalog_dsn)
    create, expected, remove = FOREIGN_DEPENDENTS[kind]
    iso = IsolatedSchema(catalog_dsn).open()
    _seed(iso, 3)
    with psycopg.connect(catalog_dsn, autocommit=True) as conn:
        conn.execute(create.format(s=sql.Identifier(iso.name).as_string(conn)).encode())
    with pytest.raises(IsolationError, match=expected):
        iso.close()
    assert _run_schemas(catalog_dsn) == [iso.name]  # left in place, not cascaded
    with psycopg.connect(catalog_dsn, autocommit=True) as conn:
        conn.execute(remove)
        assert drop_own_schema(conn, iso.name, iso.run_id)
    assert _snapshot(catalog_dsn) == before


# --- stale schemas of killed runs -----------------------------------------------------------


def _make_marked(conn: psycopg.Connection[Any], name: str, marker: dict[str, Any] | str) -> None:
    comment = marker if isinstance(marker, str) else json.dumps(marker)
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    conn.execute(
        sql.SQL("COMMENT ON SCHEMA {} IS {}").format(sql.Identifier(name), sql.Literal(comment))
    )
    conn.execute(sql.SQL("CREATE TABLE {}.t (x int)").format(sql.Identifier(name)))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_cleanup_drops_only_marked_schemas_of_dead_or_expired_runs(catalog_dsn: str) -> None:
    before = _snapshot(catalog_dsn)
    host = socket.gethostname()
    now = datetime.now(UTC)
    recent, old = now.isoformat(), (now - timedelta(days=3)).isoformat()
    me = isolation._process_start(os.getpid())

    def marker(**kw: Any) -> dict[str, Any]:
        base = {
            "tool": "pytest-searcheval",
            "run_id": uuid.uuid4().hex,
            "pid": os.getpid(),
            "pid_started": me,
            "host": host,
            "pidns": isolation._pid_namespace(),
            "created_at": recent,
            "version": "0",
        }
        return {**base, **kw}

    cases: dict[str, tuple[dict[str, Any] | str, bool]] = {
        "searcheval_dead": (marker(pid=_dead_pid(), pid_started=None), True),
        "searcheval_reused_pid": (marker(pid_started=(me or 0) - 1000.0), True),
        "searcheval_expired_elsewhere": (marker(host="elsewhere", created_at=old), True),
        "searcheval_live": (marker(), False),
        "searcheval_live_elsewhere": (marker(host="elsewhere", pid=1), False),
        # created long ago on another host but still beating: a long-running service
        "searcheval_beating_elsewhere": (
            marker(host="elsewhere", pid=1, created_at=old, heartbeat_at=recent),
            False,
        ),
        # same hostname, another container's pid namespace: its pid means nothing here
        "searcheval_other_pidns": (marker(pid=_dead_pid(), pidns="pid:[1]"), False),
        "searcheval_not_json": ('{"tool": "pytest-searcheval", oops', False),
        "searcheval_no_run_id": ({"tool": "pytest-searcheval", "pid": 1, "host": "x"}, False),
        "otherprefix_dead": (marker(pid=_dead_pid()), False),
    }
    with psycopg.connect(catalog_dsn, autocommit=True) as conn:
        for name, (mark, _) in cases.items():
            _make_marked(conn, name, mark)
        dropped = drop_stale_schemas(conn, ttl_seconds=24 * 3600)
        rows = conn.execute("SELECT nspname FROM pg_namespace").fetchall()
    remaining = {str(r[0]) for r in rows}
    assert sorted(dropped) == sorted(n for n, (_, gone) in cases.items() if gone)
    for name, (_, gone) in cases.items():
        assert (name not in remaining) == gone, name
    with psycopg.connect(catalog_dsn, autocommit=True) as conn:
        for name, (_, gone) in cases.items():
            if not gone:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))
    assert _snapshot(catalog_dsn) == before


def test_killed_run_is_cleaned_by_the_next_run_and_user_data_is_unchanged(catalog_dsn: str) -> None:
    before = _snapshot(catalog_dsn)
    code = textwrap.dedent(
        f"""
        import sys, time
        from pytest_searcheval.engine.isolation import IsolatedSchema
        iso = IsolatedSchema({catalog_dsn!r}).open()
        with iso.connection() as c:
            c.execute("INSERT INTO documents (id) VALUES ('killed-run')")
        print(iso.name, flush=True)
        time.sleep(60)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        killed_name = proc.stdout.readline().strip()
        assert killed_name.startswith("searcheval_")
        # a concurrent run while the other one lives must leave it alone
        with IsolatedSchema(catalog_dsn) as concurrent:
            assert killed_name not in concurrent.stale_dropped
            assert killed_name in _run_schemas(catalog_dsn)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert _run_schemas(catalog_dsn) == [killed_name]  # SIGKILL: no cleanup ran

    # a successful run, a failing run, then a run that cannot prove ownership
    with IsolatedSchema(catalog_dsn) as nxt:
        assert nxt.stale_dropped == [killed_name]
        _seed(nxt, 2000)
        with nxt.connection() as conn:
            conn.execute("DELETE FROM documents WHERE id LIKE 'd1%'")
            conn.execute("UPDATE documents SET title = upper(title)")
    with pytest.raises(ZeroDivisionError), IsolatedSchema(catalog_dsn) as failing:
        _seed(failing)
        _ = 1 / 0
    assert _run_schemas(catalog_dsn) == []
    assert _snapshot(catalog_dsn) == before


def test_runs_as_an_unprivileged_database_role(catalog_dsn: str) -> None:
    """Production DSNs rarely belong to a superuser: everything works with CREATE on the database,
    and a stale schema this role cannot drop is left in place with a warning, not an error."""
    role = f"searcheval_app_{uuid.uuid4().hex[:6]}"
    dbname = conninfo_to_dict(catalog_dsn)["dbname"]
    with psycopg.connect(catalog_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(str(dbname)), sql.Identifier(role)
            )
        )
        foreign_stale = "searcheval_stale_of_postgres"
        _make_marked(
            conn,
            foreign_stale,
            {
                "tool": "pytest-searcheval",
                "run_id": "x",
                "pid": _dead_pid(),
                "host": socket.gethostname(),
                "pidns": isolation._pid_namespace(),
                "created_at": datetime.now(UTC).isoformat(),
            },
        )
    app_dsn = make_conninfo(catalog_dsn, user=role)
    try:
        with pytest.warns(UserWarning, match=foreign_stale), IsolatedSchema(app_dsn) as iso:
            assert iso.stale_dropped == []
            _seed(iso, 5)
            with iso.connection() as conn:
                assert conn.execute("SELECT current_user").fetchone() == (role,)
                assert conn.execute("SELECT count(*) FROM documents").fetchone() == (5,)
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("INSERT INTO shop.customers VALUES (0, 'x', 'y')")
        assert foreign_stale in _run_schemas(catalog_dsn)
        assert iso.name not in _run_schemas(catalog_dsn)
    finally:
        with psycopg.connect(catalog_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(foreign_stale))
            )
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_an_isolated_schema_is_opened_once(catalog_dsn: str) -> None:
    iso = IsolatedSchema(catalog_dsn).open()
    try:
        with pytest.raises(IsolationError, match="already opened"):
            iso.open()
        assert _run_schemas(catalog_dsn) == [iso.name]
    finally:
        iso.close()
    with pytest.raises(IsolationError, match="already opened"):
        iso.open()
    assert _run_schemas(catalog_dsn) == []
