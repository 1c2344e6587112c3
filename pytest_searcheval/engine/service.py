"""Serve an engine over HTTP from a background thread (uvicorn), for tests and the plugin.

``serve_in_thread`` binds the socket itself before starting uvicorn, so ``port=0`` yields a
free port that is known (and already accepting connections) when the function returns. ``stop``
asks uvicorn to exit, waits for in-flight requests to finish and joins the thread.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_searcheval.engine.app import SearchEngine, create_app

if TYPE_CHECKING:
    from pytest_searcheval.engine.connections import ConnectionLimits

__all__ = ["RunningService", "ServiceError", "serve_in_thread", "warm"]

WARM_QUERY = "warm-up search for a paid API"


class ServiceError(RuntimeError):
    """The HTTP service did not start (or stop) in time; the message says why."""


@dataclass
class RunningService:
    """A running service: ``url`` (``http://host:port``), the admin ``token``, ``stop()``."""

    url: str
    token: str | None
    host: str
    port: int
    _server: Any = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _stopped: bool = field(default=False, repr=False)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and join the thread. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        if self._thread.is_alive():
            raise ServiceError(f"HTTP service at {self.url} did not stop within {timeout:g} s")

    def __enter__(self) -> RunningService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(
    engine: SearchEngine,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    *,
    admin: bool = True,
    startup_timeout: float = 15.0,
    limits: ConnectionLimits | None = None,
) -> RunningService:
    """Start the HTTP service for ``engine`` in a daemon thread and return once it accepts.

    ``token=None`` with ``admin=True`` makes a random admin token (``RunningService.token``);
    ``admin=False`` disables the admin routes. ``limits``: the connection cap, header timeout
    and log interval (default: ``ConnectionLimits()``, as ``serve`` has them).
    """
    import uvicorn

    from pytest_searcheval.engine.connections import Server, uvicorn_options

    admin_token = (token or secrets.token_urlsafe(32)) if admin else None
    app = create_app(engine, admin_token=admin_token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the
    # protocol is IPPROTO_TCP (proto 0 is skipped), and without it every keep-alive response
    # waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServiceError(f"cannot listen on {host}:{port}: {exc}") from None
    bound_port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=5,
        **uvicorn_options(limits),
    )
    server = Server(config)
    # uvicorn installs signal handlers only on the main thread; this one is not.
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced to the caller below
            failure.append(exc)
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    thread = threading.Thread(target=run, name=f"searcheval-http-{bound_port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if failure or not thread.is_alive():
            raise ServiceError(f"HTTP service failed to start: {failure[0] if failure else '?'}")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise ServiceError(f"HTTP service did not start within {startup_timeout:g} s")
        time.sleep(0.01)
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    return RunningService(
        url=f"http://{shown}:{bound_port}",
        token=admin_token,
        host=host,
        port=bound_port,
        _server=server,
        _thread=thread,
    )


def warm(engine: Any) -> float:
    """Load what the first query would otherwise load (the embedding model, the cross-encoder,
    the SQL plans) by searching once with every usable profile; returns the seconds it took.

    The warm-up text is an ordinary search: its vector is cached like any query's.
    """
    t0 = time.perf_counter()
    embedder = getattr(engine, "embedder", None)
    if embedder is not None and hasattr(embedder, "warm"):
        embedder.warm(WARM_QUERY)
    for profile, reason in engine.profiles().items():
        if reason is None:
            engine.search(WARM_QUERY, profile=profile, limit=10)
    return time.perf_counter() - t0
