"""How many requests run at once, in two classes that never wait for each other.

Handlers run on worker threads (anyio's default limiter, per event loop, has 40). The
middleware caps them at ``tokens`` per class, so that requests beyond the cap wait in the event
loop, where waiting costs nothing, rather than as threads that take turns at the GIL and queue
for a pool connection mid-request. The two classes:

* **database**: a search with a profile that reads PostgreSQL (``semantic``, ``hybrid``,
  ``hybrid_rerank``, the default ``hybrid`` when none is given), ``/healthz`` and the admin
  routes;
* **memory**: everything else, a ``lexical`` search among them (ranked from the in-memory
  postings), the listings and the OpenAPI document.

A database that hangs holds database requests for at most the engine's query bound
(``EngineSettings.db_query_seconds``); a lexical search never waits behind them. A database
request that gets no thread within the connection wait (``db_wait_seconds``) while the engine
reports the database hung (``Engine.database_hung``) is answered 503 at once; while it is not
hung the request keeps waiting, since a busy service is not an outage.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["Capacity", "needs_database"]

_SEARCH_PATHS = ("/search", "/discovery/search")
_MEMORY_PROFILES = ("lexical",)


def needs_database(path: str, query_string: bytes) -> bool:
    """Whether a request to ``path`` with ``query_string`` does database work."""
    if path in _SEARCH_PATHS:
        pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
        profiles = [value for key, value in pairs if key == "profile"]
        # no profile is the default hybrid; a repeated one is refused, but counted as database
        return not (len(profiles) == 1 and profiles[0] in _MEMORY_PROFILES)
    return path == "/healthz" or path.startswith("/admin/")


class Capacity:
    """ASGI middleware: see the module docstring. ``engine`` is asked ``database_hung`` and
    its schema's ``wait_seconds`` (both optional: an engine without them just waits)."""

    def __init__(self, app: Any, tokens: int, engine: Any) -> None:
        self.app = app
        self.tokens = tokens
        self.engine = engine
        self.loops: dict[int, tuple[Any, Any]] = {}

    def _limiters(self) -> tuple[Any, Any]:
        loop = id(asyncio.get_running_loop())
        limiters = self.loops.get(loop)
        if limiters is None:
            import anyio
            import anyio.to_thread

            # every handler thread of both classes fits: the classes do the capping
            anyio.to_thread.current_default_thread_limiter().total_tokens = 2 * self.tokens
            limiters = (anyio.CapacityLimiter(self.tokens), anyio.CapacityLimiter(self.tokens))
            self.loops[loop] = limiters
        return limiters

    def _hung(self) -> bool:
        return bool(getattr(self.engine, "database_hung", False))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        memory, database = self._limiters()
        if not needs_database(scope.get("path", ""), scope.get("query_string", b"")):
            async with memory:
                await self.app(scope, receive, send)
            return
        import anyio

        wait = float(getattr(getattr(self.engine, "schema", None), "wait_seconds", 1.0))
        while True:
            with anyio.move_on_after(wait):
                await database.acquire()
                break
            if self._hung():
                await _refuse(scope, send)
                return
        try:
            await self.app(scope, receive, send)
        finally:
            database.release()


async def _refuse(scope: Any, send: Any) -> None:
    message = "database unavailable (it stopped answering; every request that needs it waits)"
    body: dict[str, Any] = {"error": message, "field": None}
    if scope.get("path") == "/healthz":
        body = {"status": "error", **body}
    raw = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(raw)).encode("ascii")),
                (b"retry-after", b"1"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})
