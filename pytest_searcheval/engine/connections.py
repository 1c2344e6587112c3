"""The HTTP connections of the service: uvicorn's h11 protocol with the service's own answers
and bounds on what a connection may hold.

uvicorn answers a request it cannot parse (a bad request line, a header without a colon, a
missing ``Host``, two ``Content-Length``, a broken chunk, an unknown ``Transfer-Encoding``,
a non-ASCII target) itself, before the application sees it, with a ``text/plain`` body.
:class:`ServiceProtocol` answers them in the service's JSON error shape
``{"error": <what was expected>, "field": null}`` and with h11's status hint (431 for a
header block past the limit, else 400).

Connection hygiene (uvicorn 0.54 has no header timeout; its ``limit_concurrency`` counts idle
connections too and answers a ``text/plain`` 503 only once a request arrives, so an idle flood
still takes every descriptor):

* **header timeout**: a connection must deliver a complete request head within
  ``header_timeout`` seconds of opening (or, on a kept-alive connection, of its next request's
  first byte), however slowly it trickles bytes; else it is closed.
* **body timeout**: a request's body must be complete within ``body_timeout`` seconds of its
  head (uvicorn restarts its keep-alive clock on every byte, so a body trickled after the
  answer, or into a route that reads it, held the connection for ever); else the client gets
  a JSON 408 when no answer has begun, and the connection is closed.
* **connection cap**: at most ``max_connections`` connections are open (default: the soft
  ``RLIMIT_NOFILE`` less the accept batch and a reserve for the database pool and files, so
  that ``accept()`` never runs out of descriptors). A new connection beyond the cap closes the
  oldest one that is waiting for a request head (idle or kept alive between requests), so idle
  connections can never lock a client out; when every connection is inside a request, the new
  one is refused at once with a JSON 503.
* **no log flood**: what clients cause per connection (headers that timed out, connections
  evicted or refused, unparseable requests, and asyncio's ``socket.accept() out of system
  resource``, which CPython 3.11 logs with a traceback up to 2,048 times per second) is logged
  as one line per ``log_interval`` seconds with a count.

:func:`uvicorn_options` is what ``serve`` and ``serve_in_thread`` pass to ``uvicorn.Config``;
:class:`Server` is the uvicorn server that installs the log limits while it runs.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import resource
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol

__all__ = [
    "ConnectionLimits",
    "Server",
    "ServiceProtocol",
    "default_max_connections",
    "malformed_body",
    "uvicorn_options",
]

#: how much of h11's reason (which quotes the client's bytes) the error body repeats
MAX_REASON_CHARS = 120
#: uvicorn's ``backlog``: asyncio accepts up to this many connections per wake-up of the loop
#: and reaches their ``connection_made`` (where one past the cap evicts an idle one) and that
#: one's close two and three wake-ups later, so up to about 3 batches are open beyond the cap
ACCEPT_BATCH = 256
#: the kernel's queue of connections not accepted yet, set on the listening socket after
#: uvicorn's ``listen(ACCEPT_BATCH)``: a burst waits there instead of having its SYNs dropped
LISTEN_QUEUE = 4096
#: descriptors kept for everything but client connections (pool, files, pipes, libraries)
RESERVED_DESCRIPTORS = 512
#: seconds a refused connection is drained before it is closed
REFUSAL_LINGER = 0.5
#: messages whose repeats are counted rather than logged (asyncio's and uvicorn's loggers)
_NOISY = {
    "asyncio": ("socket.accept() out of system resource",),
    "uvicorn.error": (
        "Invalid HTTP request received.",
        "Unsupported upgrade request.",
        "No supported WebSocket library detected.",
    ),
}

log = logging.getLogger("pytest_searcheval.engine.connections")


def default_max_connections(soft_limit: int | None = None) -> int:
    """The connection cap for the process's soft ``RLIMIT_NOFILE`` (or ``soft_limit``): what
    stays after four accept batches (see ``ACCEPT_BATCH``) and ``RESERVED_DESCRIPTORS``; at
    least a quarter of the limit."""
    if soft_limit is None:
        soft_limit, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft_limit == resource.RLIM_INFINITY:
            soft_limit = 1 << 20
    return max(soft_limit // 4, soft_limit - 4 * ACCEPT_BATCH - RESERVED_DESCRIPTORS)


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds of one server's connections (see the module docstring)."""

    #: open connections at most; None: :func:`default_max_connections`
    max_connections: int | None = None
    #: seconds from a connection's first byte (or its opening) to a complete request head
    header_timeout: float = 10.0
    #: seconds from a complete request head to the end of its body
    body_timeout: float = 10.0
    #: seconds between two log lines about the same kind of client-caused event
    log_interval: float = 10.0

    def cap(self) -> int:
        return self.max_connections or default_max_connections()


class _Counter:
    """Events of one kind, logged at most once per ``interval``: the first at once, the
    rest as one line with their count when the interval is over."""

    def __init__(self, what: str, interval: float) -> None:
        self.what = what
        self.interval = interval
        self.pending = 0
        self.total = 0
        self.last = -float("inf")
        self.flush: asyncio.TimerHandle | None = None

    def note(self, loop: asyncio.AbstractEventLoop, detail: str = "") -> None:
        self.total += 1
        now = time.monotonic()
        if self.flush is None and now - self.last >= self.interval:
            self.last = now
            log.warning("%s%s", self.what, f" ({detail})" if detail else "")
            return
        self.pending += 1
        if self.flush is None:
            self.flush = loop.call_later(self.last + self.interval - now, self._flush)

    def _flush(self) -> None:
        self.flush = None
        if self.pending:
            log.warning("%s: %d more in the last %.0f s", self.what, self.pending, self.interval)
            self.pending = 0
            self.last = time.monotonic()


@dataclass
class _Registry:
    """What the connections of one server share: who waits for a request head, oldest
    first, and the counts of what they caused."""

    limits: ConnectionLimits
    cap: int
    waiting: collections.OrderedDict[ServiceProtocol, None] = field(
        default_factory=collections.OrderedDict
    )
    timed_out: _Counter = field(init=False)
    body_timed_out: _Counter = field(init=False)
    evicted: _Counter = field(init=False)
    refused: _Counter = field(init=False)

    def __post_init__(self) -> None:
        every = self.limits.log_interval
        self.timed_out = _Counter(
            f"closed a connection with no complete request head after"
            f" {self.limits.header_timeout:g} s",
            every,
        )
        self.body_timed_out = _Counter(
            f"closed a connection whose request body was not complete"
            f" {self.limits.body_timeout:g} s after its head",
            every,
        )
        self.evicted = _Counter(
            f"at the cap of {self.cap} connections: closed the oldest one waiting for a request",
            every,
        )
        self.refused = _Counter(
            f"at the cap of {self.cap} connections, all inside requests: refused one (503)",
            every,
        )


def malformed_body(reason: str) -> bytes:
    """The error body of a request the HTTP parser refused, ``reason`` being h11's words."""
    message = f"malformed HTTP/1.1 request ({reason}): expected a request line, headers and a body"
    return json.dumps({"error": message, "field": None}).encode("utf-8")


def _refusal() -> bytes:
    body = json.dumps({"error": "too many open connections: retry later", "field": None}).encode(
        "utf-8"
    )
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n"
        b"connection: close\r\nretry-after: 1\r\n\r\n" + body
    )


def _body_timeout(seconds: float) -> bytes:
    body = json.dumps(
        {
            "error": f"the request body was not complete within {seconds:g} s of its head",
            "field": "body",
        }
    ).encode("utf-8")
    return (
        b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
        b"content-length: " + str(len(body)).encode("ascii") + b"\r\n"
        b"connection: close\r\n\r\n" + body
    )


class ServiceProtocol(H11Protocol):
    """uvicorn's h11 protocol answering unparseable requests with the service's JSON body and
    keeping to its server's :class:`ConnectionLimits` (a subclass per server carries them:
    :func:`uvicorn_options`)."""

    registry: _Registry | None = None
    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _refused = False

    # -- the cap and the header timeout ------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        registry = self.registry
        if registry is None:
            return
        if len(self.connections) > registry.cap:
            if registry.waiting:
                oldest, _ = registry.waiting.popitem(last=False)
                oldest._close_waiting()
                registry.evicted.note(self.loop)
            else:
                registry.refused.note(self.loop)
                self._refuse()
                return
        self._wait_for_head()

    def _refuse(self) -> None:
        """Answer 503 at once and close; the request the client sends meanwhile is read and
        dropped for a moment, since closing on unread bytes would reset the connection before
        the client has read the answer."""
        self._refused = True
        self.connections.discard(self)
        self.transport.write(_refusal())
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(REFUSAL_LINGER, self.transport.close)

    def eof_received(self) -> None:
        if self._refused:
            self.transport.close()

    def _wait_for_head(self) -> None:
        """Start the clock for a request head (once per request) and join the waiting ones."""
        registry = self.registry
        if registry is None or self.transport.is_closing():
            return
        registry.waiting[self] = None
        registry.waiting.move_to_end(self)
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(
                registry.limits.header_timeout, self._head_timed_out
            )

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if self.registry is not None:
            self.registry.waiting.pop(self, None)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.registry is not None and not self.transport.is_closing():
            self.registry.waiting.pop(self, None)
            self.registry.timed_out.note(self.loop)
            self._close_waiting()

    def _close_waiting(self) -> None:
        self._head_arrived()
        if not self.transport.is_closing():
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # the request of a refused connection: dropped
        super().data_received(data)
        if self.registry is None:
            return
        if self.conn.their_state is h11.IDLE and self.cycle_done():
            self._wait_for_head()  # bytes of a request head, not all of it yet
        else:
            self._head_arrived()
        self._watch_body()

    # -- the body timeout --------------------------------------------------------------------

    def _watch_body(self) -> None:
        """Start the body's clock when a head has arrived and its body has not; stop it when
        the body is complete."""
        if self.registry is None or self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY:
            if self._body_timer is None:
                self._body_timer = self.loop.call_later(
                    self.registry.limits.body_timeout, self._body_timed_out
                )
        else:
            self._stop_body_clock()

    def _stop_body_clock(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.registry is None or self.transport.is_closing():
            return
        if self.conn.their_state is not h11.SEND_BODY:
            return
        self.registry.body_timed_out.note(self.loop)
        if self.cycle is not None and not self.cycle.response_started:
            # the route is still waiting for the body: answer for it; the close below makes
            # uvicorn tell it the client is gone, and what it sends then is dropped
            self.transport.write(_body_timeout(self.registry.limits.body_timeout))
        self.transport.close()

    def cycle_done(self) -> bool:
        """No request is being served on this connection."""
        return self.cycle is None or self.cycle.response_complete

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # kept alive: uvicorn's keep-alive timeout bounds the wait for the next request's first
        # byte; meanwhile the connection may be evicted like any waiting one
        if (
            self.registry is not None
            and not self.transport.is_closing()
            and self.cycle_done()
            and self.conn.their_state is h11.IDLE
        ):
            self.registry.waiting[self] = None
            self.registry.waiting.move_to_end(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        self._stop_body_clock()
        super().connection_lost(exc)

    # -- unparseable requests ----------------------------------------------------------------

    def send_400_response(self, msg: str) -> None:
        # Called from uvicorn's `except h11.RemoteProtocolError` block: the error is current.
        exc = sys.exc_info()[1]
        reason = str(exc) if isinstance(exc, h11.RemoteProtocolError) and str(exc) else msg
        status = getattr(exc, "error_status_hint", 400)
        if not 400 <= status < 500:
            status = 400
        reason = reason.rstrip(".")
        if len(reason) > MAX_REASON_CHARS:  # h11 quotes the offending bytes
            reason = reason[:MAX_REASON_CHARS] + "..."
        body = malformed_body(reason)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode("ascii")),
            (b"connection", b"close"),
        ]
        self._head_arrived()
        try:
            head = self.conn.send(
                h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status])
            )
            self.transport.write((head or b"") + (self.conn.send(h11.Data(data=body)) or b""))
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            pass  # a response had already begun: nothing more can be said on this connection
        self.transport.close()


class _RateLimit(logging.Filter):
    """A logging filter passing the first of each noisy message per interval (without its
    traceback) and, with the next one after the interval, how many it held back."""

    def __init__(self, prefixes: tuple[str, ...], interval: float) -> None:
        super().__init__()
        self.prefixes = prefixes
        self.interval = interval
        self.held: dict[str, int] = {}
        self.last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        prefix = next((p for p in self.prefixes if message.startswith(p)), None)
        if prefix is None:
            return True
        now = time.monotonic()
        if now - self.last.get(prefix, -float("inf")) < self.interval:
            self.held[prefix] = self.held.get(prefix, 0) + 1
            return False
        self.last[prefix] = now
        held = self.held.pop(prefix, 0)
        exc = record.exc_info[1] if record.exc_info else None
        record.msg = prefix + (f": {exc}" if exc else "")
        if held:
            record.msg += f" ({held} more in the last {self.interval:.0f} s not logged)"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


@contextlib.contextmanager
def limited_logs(interval: float) -> Iterator[None]:
    """Rate-limit the noisy messages of asyncio's and uvicorn's loggers while in the block."""
    filters = [(logging.getLogger(name), _RateLimit(p, interval)) for name, p in _NOISY.items()]
    for logger, rate in filters:
        logger.addFilter(rate)
    try:
        yield
    finally:
        for logger, rate in filters:
            logger.removeFilter(rate)


class Server(uvicorn.Server):
    """uvicorn's server with the noisy log messages rate-limited while it serves and its
    listening sockets' queues at ``LISTEN_QUEUE``."""

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        for server in getattr(self, "servers", ()):
            for listener in server.sockets:
                # a duplicate of the descriptor: listen() on it sets the shared socket's queue
                with socket.fromfd(listener.fileno(), listener.family, listener.type) as dup:
                    dup.listen(LISTEN_QUEUE)

    async def serve(self, sockets: Any = None) -> None:
        registry = getattr(self.config.http, "registry", None)
        limits = registry.limits if isinstance(registry, _Registry) else ConnectionLimits()
        with limited_logs(limits.log_interval):
            await super().serve(sockets)


def protocol_class(limits: ConnectionLimits) -> type[ServiceProtocol]:
    """A :class:`ServiceProtocol` for one server: its connections share one registry."""
    registry = _Registry(limits=limits, cap=limits.cap())
    return type("BoundServiceProtocol", (ServiceProtocol,), {"registry": registry})


def uvicorn_options(limits: ConnectionLimits | None = None) -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config`` that every server of the service uses."""
    limits = limits or ConnectionLimits()
    # ws="none": the service has no WebSocket route, and with the websockets library installed
    # uvicorn answered an upgrade request itself in text/plain (400 without Sec-WebSocket-Key,
    # 403 with it); without, the request is served as the plain HTTP request it also is
    return {"http": protocol_class(limits), "backlog": ACCEPT_BATCH, "ws": "none"}
