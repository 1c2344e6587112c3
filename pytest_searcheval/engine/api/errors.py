"""The exception handlers: every failure leaves the service as its JSON error body.

A :class:`.params.ClientError` or a ``FilterError`` is the client's (4xx, naming the field);
Starlette's own HTTP errors (404, 405 with ``Allow``) and FastAPI's validation errors keep
their status in the same body; anything else is a 503 when the database is out and a 500
(logged, nothing leaked) otherwise.
"""

from __future__ import annotations

import logging
import threading
import time

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Match

from pytest_searcheval.engine.api.params import ClientError
from pytest_searcheval.engine.api.responses import error
from pytest_searcheval.engine.db import DatabaseHung
from pytest_searcheval.engine.x402 import FilterError

__all__ = ["install", "is_database_outage"]

log = logging.getLogger("pytest_searcheval.engine.app")

_METHODS = ("CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE")


def client_error(request: Request, exc: ClientError) -> JSONResponse:
    return error(exc.status, exc.field, exc.message, **exc.extra)


def filter_error(request: Request, exc: FilterError) -> JSONResponse:
    return error(400, exc.field, exc.message)


def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    response = error(exc.status_code, None, str(exc.detail))
    for key, value in (exc.headers or {}).items():
        response.headers[key] = value
    if exc.status_code == 405:
        # Starlette names the methods of the first route whose path matched; a path served by
        # several routes (PUT and DELETE /admin/resources/{id}) accepts the methods of all.
        response.headers["Allow"] = ", ".join(allowed_methods(request))
    return response


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on the request's path, sorted: each method asked of
    each route (an included router keeps its routes' methods to itself)."""
    methods = [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]
    return sorted(methods)


def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(p) for p in first.get("loc", ()) if p not in ("query", "path", "body")]
    return error(400, ".".join(loc) or None, str(first.get("msg", "invalid request")))


def client_gone(request: Request, exc: ClientDisconnect) -> JSONResponse:
    # The client went away mid-body: nobody reads this answer, and it is not a bug to log.
    return error(400, "body", "the connection closed before the body was complete")


class _OutageLog:
    """One warning per ``every`` seconds about the database being unavailable, with the count
    of the ones left out: a hung database refuses hundreds of requests a second."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self.last = float("-inf")
        self.skipped = 0
        self.lock = threading.Lock()

    def warn(self, path: str, exc: BaseException) -> None:
        with self.lock:
            now = time.monotonic()
            if now - self.last < self.every:
                self.skipped += 1
                return
            skipped, self.skipped, self.last = self.skipped, 0, now
        more = f" ({skipped} more since the last such warning)" if skipped else ""
        log.warning("database unavailable serving %s: %s%s", path, exc, more)


outage_log = _OutageLog()


def database_outage(request: Request, exc: Exception) -> JSONResponse:
    # A database that is down or hung, or a pool with no free connection in time, is a
    # temporary outage (503). Registered for the exception classes themselves, so Starlette
    # answers without logging a traceback per request.
    outage_log.warn(request.url.path, exc)
    return error(503, None, f"database unavailable ({type(exc).__name__})")


def internal(request: Request, exc: Exception) -> JSONResponse:
    # Never the client's fault: log it, say so, leak nothing. A database that is down or a
    # pool with no free connection in time is a temporary outage (503), anything else a bug.
    if is_database_outage(exc):
        return database_outage(request, exc)
    log.exception("unhandled error serving %s", request.url.path)
    return error(500, None, f"internal error ({type(exc).__name__})")


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(ClientError, client_error)  # type: ignore[arg-type]
    app.add_exception_handler(FilterError, filter_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(ClientDisconnect, client_gone)  # type: ignore[arg-type]
    import psycopg
    import psycopg_pool

    for outage in (psycopg.OperationalError, psycopg_pool.PoolTimeout, DatabaseHung):
        app.add_exception_handler(outage, database_outage)
    app.add_exception_handler(Exception, internal)


def is_database_outage(exc: BaseException) -> bool:
    import psycopg
    import psycopg_pool

    return isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout, DatabaseHung))
