"""How a run ends: stop signals turned into an orderly unwind, and what dead runs left behind.

Signals. PostgreSQL, the run's schema and the embedded server's directory are released by
``with`` blocks and ``finally`` clauses (Engine.close, EmbeddedServer.stop). Python runs those
on SIGINT (KeyboardInterrupt) but not on SIGTERM, SIGHUP, SIGUSR1 or any other signal whose
default action ends the process at once. :func:`stop_on_signals` makes every one of them that
can be caught (``STOP_SIGNALS``; the fault signals SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
SIGTRAP and SIGSYS aside) raise :class:`Stopped` (a KeyboardInterrupt, so pytest and every
``except KeyboardInterrupt`` treat it as Ctrl-C) in the main thread; a later signal while the
first one unwinds is reported and ignored, so cleanup is not cut short. A caller that owns an
event loop (``serve``) passes ``on_signal`` to be told instead, and stops its loop itself.

Some steps must not be cut in the middle: starting the embedded server (its directory, its
``pg_ctl start``, the handle that will stop it) and stopping it. They run under
:func:`stops_deferred`: a stop signal there is held and raised when the step is over, so the
unwind finds either nothing or a server with a handle, never a postgres no one will stop. After
the unwind, :func:`own_leftovers` says whether anything this process started is still there
(and :func:`remove_own_leftovers` removes it), so that "cleaned up" is said only when true.

Leftovers. Only SIGKILL (or a power cut) skips every cleanup. Each embedded server's temporary
directory holds an owner file (``OWNER_FILE``: tool, pid, process start time, host, pid
namespace) and a lease (``LEASE_FILE``, locked with ``flock`` by the owner for its life: the
kernel releases it when the owner dies, whatever machine it runs on);
:func:`reap_dead_servers` finds directories whose owner process is gone and whose lease is
free, stops the PostgreSQL that still runs in them and deletes them. It touches nothing without
our owner file, nothing owned by another user, nothing whose owner is alive, on another host or
holds its lease (a temp directory shared by two machines with one hostname), and only a
postmaster whose data directory lies inside the directory being removed. Marked schemas of dead
runs on a server of the user's are dropped by engine/isolation.py (drop_stale_schemas).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_searcheval.files import write_atomic

__all__ = [
    "LEASE_FILE",
    "OWNER_FILE",
    "SERVER_DIR_PREFIX",
    "STOP_SIGNALS",
    "Stopped",
    "ignore_stop_signals",
    "own_leftovers",
    "reap_dead_servers",
    "remove_own_leftovers",
    "stop_on_signals",
    "stops_deferred",
    "write_owner",
]

MARKER_TOOL = "pytest-searcheval"
OWNER_FILE = "searcheval-owner.json"
LEASE_FILE = "searcheval-owner.lock"
SERVER_DIR_PREFIX = "searcheval-pg-"
#: SIGTERM, SIGINT and SIGHUP always; the others when their action is still the default
#: (a handler someone else installed, pytest-timeout's on SIGALRM say, is left alone)
_ALWAYS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STOP_SIGNALS: tuple[signal.Signals, ...] = (
    *_ALWAYS,
    *(
        getattr(signal, name)
        for name in (
            "SIGQUIT",
            "SIGUSR1",
            "SIGUSR2",
            "SIGALRM",
            "SIGVTALRM",
            "SIGPROF",
            "SIGXCPU",
            "SIGXFSZ",
            "SIGIO",
            "SIGPWR",
            "SIGSTKFLT",
        )
        if hasattr(signal, name)
    ),
)


def _stop_signals() -> list[int]:
    """The signals :func:`stop_on_signals` handles now: ``STOP_SIGNALS`` and the real-time
    ones (which also end a process by default), each but the first three only while its
    action is the default."""
    extra: list[int] = [s for s in STOP_SIGNALS if s not in _ALWAYS]
    if hasattr(signal, "SIGRTMIN"):
        extra += range(signal.SIGRTMIN, signal.SIGRTMAX + 1)
    chosen: list[int] = list(_ALWAYS)
    for sig in extra:
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                chosen.append(sig)
        except (OSError, ValueError):
            continue
    return chosen


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; raised in the main thread so that every cleanup runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {_name(signum)}")
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The shell's convention for a process ended by signal N: 128 + N."""
        return 128 + self.signum


@contextlib.contextmanager
def stop_on_signals(
    on_signal: Callable[[int], bool] | None = None,
    *,
    say: Callable[[str], None] | None = None,
) -> Iterator[list[int]]:
    """Within the block, SIGTERM, SIGINT and SIGHUP raise :class:`Stopped` in the main thread.

    ``on_signal(signum)`` is asked first; when it returns True the signal was handled (for
    example an event loop was told to stop) and nothing is raised. The block receives the list
    of signals seen. Only the first signal acts; later ones are reported through ``say`` and
    ignored, so that a second Ctrl-C cannot interrupt the cleanup the first one started (SIGKILL
    still ends the process, and the next start removes what it left). Outside the main thread
    (where Python cannot set handlers) the block runs with the handlers unchanged.
    """
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return
    tell = say or (lambda message: print(message, file=sys.stderr, flush=True))

    def handler(signum: int, frame: Any) -> None:
        seen.append(signum)
        if len(seen) > 1:
            tell(
                f"{_name(signum)}: already stopping, cleaning up"
                " (SIGKILL abandons the cleanup; the next start removes what is left)"
            )
            return
        if on_signal is not None and on_signal(signum):
            return
        if _deferred.depth:
            _deferred.pending = signum  # raised when the step that must not be cut is over
            return
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, handler) for sig in _stop_signals()}
    try:
        yield seen
    finally:
        # Once stopping, the handler stays: a late signal between the cleanup and the exit is
        # reported and ignored instead of killing the process and losing its exit status.
        if not seen:
            for sig, old in previous.items():
                signal.signal(sig, old)


def ignore_stop_signals() -> None:
    """Cleanup is done and the process is about to exit with its status: a signal arriving
    now must not replace that status (128+N) by a death by signal."""
    if threading.current_thread() is threading.main_thread():
        for sig in _stop_signals():
            signal.signal(sig, signal.SIG_IGN)


class _Deferred:
    depth = 0
    pending: int | None = None


_deferred = _Deferred()


@contextlib.contextmanager
def stops_deferred() -> Iterator[None]:
    """A step that must not be cut in the middle: within the block (in the main thread, under
    :func:`stop_on_signals`) a stop signal is held, and :class:`Stopped` is raised when the
    outermost such block ends, normally or not. Elsewhere the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferred.depth += 1
    try:
        yield
    finally:
        _deferred.depth -= 1
        if _deferred.depth == 0 and _deferred.pending is not None:
            signum, _deferred.pending = _deferred.pending, None
            # When the block failed, its own error is the one the caller sees first; Python
            # chains it to this one as the context.
            raise Stopped(signum)


# --- owners of embedded servers --------------------------------------------------------------


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _process_start(pid: int) -> float | None:
    try:
        import psutil

        return float(psutil.Process(pid).create_time())
    except Exception:
        return None


#: directory -> the descriptor holding its lease; a process-wide table because a lease lasts
#: as long as the process that holds it
_LEASES: dict[Path, int] = {}


def _end_gone_leases() -> None:
    """Close the leases of directories that were removed (a stopped server's)."""
    for directory, fd in list(_LEASES.items()):
        if not directory.exists():
            del _LEASES[directory]
            with contextlib.suppress(OSError):
                os.close(fd)


def take_lease(directory: Path) -> None:
    """Lock ``directory``'s lease for the life of this process. The descriptor is not
    inherited (PEP 446), so a postgres started from here does not keep the lease alive."""
    _end_gone_leases()
    fd = os.open(directory / LEASE_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    _LEASES[directory] = fd


def lease_is_free(directory: Path) -> bool:
    """True when no process holds ``directory``'s lease (or it has none: an older run's)."""
    try:
        fd = os.open(directory / LEASE_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # cannot tell: treat as held
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(fd)  # also releases the lock just taken
    return True


#: the embedded-server directories this process created (for :func:`own_leftovers`)
_OWN: set[Path] = set()


def write_owner(directory: Path) -> None:
    """Take ``directory``'s lease and record this process as its owner (written atomically)."""
    take_lease(directory)
    _OWN.add(directory)
    pid = os.getpid()
    data = {
        "tool": MARKER_TOOL,
        "pid": pid,
        "pid_started": _process_start(pid),
        "host": socket.gethostname(),
        "pidns": _pid_namespace(),
        "created_at": time.time(),
    }
    write_atomic(directory / OWNER_FILE, json.dumps(data))


@dataclass(frozen=True)
class Owner:
    pid: int
    pid_started: float | None
    host: str | None
    pidns: str | None


def read_owner(directory: Path) -> Owner | None:
    """The owner recorded in ``directory``, or None when it holds no valid owner file of ours."""
    path = directory / OWNER_FILE
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > 4096:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") != MARKER_TOOL:
        return None
    pid = data.get("pid")
    started = data.get("pid_started")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    return Owner(
        pid=pid,
        pid_started=float(started) if isinstance(started, int | float) else None,
        host=data.get("host") if isinstance(data.get("host"), str) else None,
        pidns=data.get("pidns") if isinstance(data.get("pidns"), str) else None,
    )


def owner_is_dead(owner: Owner) -> bool:
    """True only when the owner ran here (same host and pid namespace) and is gone for sure:
    no such pid, or the pid now belongs to a process started at another time."""
    if owner.host != socket.gethostname() or owner.pidns != _pid_namespace():
        return False
    import psutil

    try:
        proc = psutil.Process(owner.pid)
        started = proc.create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False  # cannot tell: treat as alive
    if owner.pid_started is not None and abs(started - owner.pid_started) > 1.0:
        return True
    return bool(proc.status() == psutil.STATUS_ZOMBIE)


def _inside(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except OSError:
        return False


def _stop_postmaster(directory: Path, timeout: float = 10.0) -> str | None:
    """Stop the PostgreSQL whose data directory lies inside ``directory``; returns what was done.

    The pid comes from ``postmaster.pid``; it is acted on only when that process's working
    directory (PostgreSQL runs in its data directory) is inside ``directory``.
    """
    import psutil

    for pidfile in directory.glob("*/postmaster.pid"):
        try:
            pid = int(pidfile.read_text(encoding="utf-8").splitlines()[0])
            proc = psutil.Process(pid)
            cwd = Path(proc.cwd())
        except (OSError, ValueError, IndexError, psutil.Error):
            continue
        if not _inside(cwd, directory):
            continue
        # SIGQUIT is PostgreSQL's immediate shutdown: the postmaster ends its children itself.
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGQUIT)
            proc.wait(timeout)
            return f"stopped PostgreSQL (pid {pid})"
        with contextlib.suppress(psutil.Error):
            proc.kill()
            return f"killed PostgreSQL (pid {pid})"
    return None


def reap_dead_servers(root: Path | None = None) -> list[str]:
    """Remove the embedded-server directories of dead runs under ``root`` (the temp directory).

    Returns one line per directory removed. A directory is removed only when it is a real
    directory (not a symlink) named ``SERVER_DIR_PREFIX*``, owned by our effective uid, holding
    our owner file, its owner is dead (see :func:`owner_is_dead`) and its lease is free.
    """
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
    done: list[str] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return done
    for path in sorted(entries):
        if not path.name.startswith(SERVER_DIR_PREFIX):
            continue
        try:
            st = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            continue
        owner = read_owner(path)
        if owner is None or not owner_is_dead(owner) or not lease_is_free(path):
            continue
        action = _stop_postmaster(path)
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            done.append(f"{path} (run pid {owner.pid}){'; ' + action if action else ''}")
    return done


def _postgres_inside(directory: Path) -> list[int]:
    """pids of the processes whose working directory lies inside ``directory`` (PostgreSQL
    runs in its data directory; a removed one still shows its old path)."""
    import psutil

    found: list[int] = []
    root = str(directory)
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            cwd = proc.cwd()
            if cwd == root or cwd.startswith(root + os.sep):
                found.append(proc.pid)
    return found


def own_leftovers() -> list[str]:
    """What this process's embedded servers left: a directory still there, a postgres still
    running in one. Empty when every server it started is stopped and removed."""
    left: list[str] = []
    for directory in sorted(_OWN):
        if directory.exists():
            left.append(str(directory))
        left += [f"postgres (pid {pid}) in {directory}" for pid in _postgres_inside(directory)]
    return left


def remove_own_leftovers() -> list[str]:
    """Stop what still runs in this process's embedded-server directories and remove them;
    returns :func:`own_leftovers` afterwards (empty when all went)."""
    import psutil

    for directory in sorted(_OWN):
        if directory.exists():
            _stop_postmaster(directory)
            shutil.rmtree(directory, ignore_errors=True)
        for pid in _postgres_inside(directory):
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                proc.send_signal(signal.SIGQUIT)
                proc.wait(10)
    _end_gone_leases()
    return own_leftovers()
