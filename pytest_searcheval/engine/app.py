"""The reference engine over HTTP (FastAPI).

Routes:

* ``GET /discovery/search?query=&type=&payTo=&scheme=&network=&extensions=&limit=&cursor=`` and
  ``GET /discovery/resources?type=&payTo=&scheme=&network=&extensions=&limit=&offset=``: x402
  Bazaar discovery as the official SDK's client speaks it, with the engine's extra parameters
  and fields (:mod:`pytest_searcheval.engine.bazaar`). A ``/discovery/search`` request that
  carries the engine's own ``q`` parameter (and no ``query``) is redirected (308) to
  ``/search``, where that parameter set now lives.
* ``GET /search?q=&profile=&limit=&extract=&<filters>`` -> the engine's own response body
  (``query, profile, results[{id, score, resource}], filters{applied, extracted}, no_result,
  model, latency_ms``). Filter parameters are the shared vocabulary (``type, network, scheme,
  asset, recipient, max_price_usd, extension``).
* ``GET /openapi.json``: the OpenAPI document of every route (engine/openapi.py).
* ``GET /healthz`` -> ``{status, profiles, defaults, postgres, pgvector, model, documents}``.
* ``PUT /admin/resources/{id}``, ``DELETE /admin/resources/{id}``, ``POST /admin/reindex``:
  need ``Authorization: Bearer <token>`` (compared in constant time); without a configured
  token the admin routes answer 403.

Every client error is a 4xx JSON body ``{"error": <what was expected>, "field": <parameter>}``
and never a 500: unknown or repeated parameters, a missing, over-long or NUL-carrying query,
a limit outside [1, MAX_LIMIT], unknown profile (400) versus unavailable profile (503 with the
reason), and every invalid filter value (see :mod:`pytest_searcheval.engine.x402`). Values reach
PostgreSQL only as bound parameters.

Search handlers are plain ``def`` functions, so Starlette runs them in its worker threads; the
engine's psycopg_pool connection pool serves the concurrent requests.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, cast

# At module level: FastAPI resolves the handlers' (string) annotations in these globals.
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from pytest_searcheval.collection.native import RecordError, checked_document
from pytest_searcheval.engine import bazaar
from pytest_searcheval.engine.x402 import (
    FILTER_KEYS,
    AssetLike,
    FilterError,
    Filters,
    parse_filters,
)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "FastJSONResponse",
    "SearchEngine",
    "create_app",
]

MAX_QUERY_CHARS = 512
MAX_LIMIT = 1000
MAX_ID_CHARS = 256
MAX_BODY_BYTES = 1_000_000
MAX_OFFSET = 10**9
LIST_LIMIT_DEFAULT = 100
PROFILES_DEFAULT = "hybrid"
SEARCH_PARAMS = ("q", "profile", "limit", "extract", *FILTER_KEYS)
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

log = logging.getLogger("pytest_searcheval.engine.app")


def _orjson_module() -> Any:
    """orjson, or None: the engine extra installs it; without it the standard encoder serves."""
    try:
        import orjson
    except ImportError:
        return None
    return orjson


_orjson = _orjson_module()


class FastJSONResponse(JSONResponse):
    """A JSONResponse rendered by orjson when it is installed: a hybrid answer of the shipped
    catalog (11 listings with their x402 objects, 15 KB) took 0.44 ms of CPU to encode with
    ``json.dumps`` and 0.05 ms with orjson, the same bytes for all 189 shipped queries
    (docs/performance.md). Values are always the same; the spelling of a number could differ
    (``1e-05`` against ``1e-5``)."""

    def render(self, content: Any) -> bytes:
        if _orjson is not None:
            try:
                return cast(bytes, _orjson.dumps(content))
            except TypeError:  # an integer beyond 64 bits, a non-str key: the standard encoder
                pass
        return super().render(content)


class SearchEngine(Protocol):
    """What the app needs of an engine (``engine.core.Engine`` fits)."""

    @property
    def assets(self) -> Sequence[AssetLike]: ...

    def search(
        self,
        q: str,
        *,
        profile: str = ...,
        limit: int = ...,
        filters: Mapping[str, Any] | None = ...,
        extract: bool = ...,
        explain: bool = ...,
    ) -> dict[str, Any]: ...

    def list_resources(
        self,
        *,
        filters: Mapping[str, Any] | None = ...,
        limit: int = ...,
        offset: int = ...,
    ) -> dict[str, Any]: ...

    def profiles(self) -> Mapping[str, str | None]: ...

    def describe(self) -> Mapping[str, Any]: ...

    def upsert(self, record: Mapping[str, Any]) -> None: ...

    def delete(self, doc_id: str) -> bool: ...

    def reindex(self) -> None: ...


class ClientError(Exception):
    """A request the service refuses: HTTP ``status``, the ``field`` at fault, what was wrong."""

    def __init__(
        self, status: int, field: str | None, message: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.message = message
        self.extra = dict(extra or {})


def _single(
    params: Sequence[tuple[str, str]], allowed: Sequence[str] = SEARCH_PARAMS
) -> dict[str, str]:
    """Query parameters as a dict; unknown, repeated or NUL-carrying ones are client errors."""
    out: dict[str, str] = {}
    for key, value in params:
        if key not in allowed:
            shown = key if len(key) <= 40 and "\x00" not in key else repr(key[:40])
            raise ClientError(
                400,
                shown,
                f"unknown parameter {shown!r}: expected one of {', '.join(allowed)}",
            )
        if key in out:
            raise ClientError(400, key, f"parameter {key!r} given more than once")
        if "\x00" in value:
            raise ClientError(400, key, "contains a NUL byte")
        out[key] = value
    return out


def _limit(raw: str | None, default: int = 10) -> int:
    if raw is None:
        return default
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 7:
        raise ClientError(
            400, "limit", f"expected an integer in [1, {MAX_LIMIT}], got {raw[:20]!r}"
        )
    value = int(text)
    if not 1 <= value <= MAX_LIMIT:
        raise ClientError(400, "limit", f"expected an integer in [1, {MAX_LIMIT}], got {value}")
    return value


def _offset(raw: str | None) -> int:
    if raw is None:
        return 0
    text = raw.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10 or int(text) >= MAX_OFFSET:
        raise ClientError(
            400, "offset", f"expected an integer in [0, {MAX_OFFSET}), got {raw[:20]!r}"
        )
    return int(text)


def _flag(raw: str | None, name: str, default: bool) -> bool:
    if raw is None:
        return default
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ClientError(400, name, f"expected true or false, got {raw[:20]!r}")


def _query(raw: str | None, cap: int, name: str = "q") -> str:
    if raw is None:
        raise ClientError(400, name, "missing: the query text is required")
    if len(raw) > cap:
        raise ClientError(400, name, f"longer than {cap} characters ({len(raw)} given)")
    if not raw.strip():
        raise ClientError(400, name, "empty: the query text is required")
    if "\ufffd" in raw:
        raise ClientError(400, name, "not valid UTF-8 (percent-encoded bytes must decode)")
    return raw


def _discovery_filters(params: Mapping[str, str], assets: Sequence[AssetLike]) -> Filters:
    """Filters from Bazaar parameters; an invalid value is reported under its parameter name."""
    raw: dict[str, str] = {}
    for name, value in params.items():
        key = bazaar.filter_key(name)
        if key is not None:
            raw[key] = value
    try:
        return parse_filters(raw, assets)
    except FilterError as exc:
        raise ClientError(400, bazaar.filter_param(exc.field), exc.message) from None


def _profile(raw: str | None, profiles: Mapping[str, str | None]) -> str:
    name = PROFILES_DEFAULT if raw is None else raw
    if name not in profiles:
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise ClientError(
            400, "profile", f"unknown profile {shown!r}: expected one of {', '.join(profiles)}"
        )
    reason = profiles[name]
    if reason is not None:
        raise ClientError(
            503,
            "profile",
            f"profile {name!r} is unavailable: {reason}",
            {"profile": name, "reason": reason},
        )
    return name


def _path_id(doc_id: str) -> str:
    if not doc_id or len(doc_id) > MAX_ID_CHARS:
        raise ClientError(400, "id", f"expected 1 to {MAX_ID_CHARS} characters")
    if "\x00" in doc_id:
        raise ClientError(400, "id", "contains a NUL byte")
    return doc_id


class _ThreadCap:
    """ASGI middleware: sync handlers run on at most ``tokens`` worker threads at once
    (anyio's default limiter, per event loop, has 40). Requests beyond it wait in the event
    loop, where waiting costs nothing, rather than as threads that take turns at the GIL and
    queue for a pool connection mid-request."""

    def __init__(self, app: Any, tokens: int) -> None:
        self.app = app
        self.tokens = tokens
        self.loops: set[int] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import asyncio

        loop = id(asyncio.get_running_loop())
        if loop not in self.loops:
            import anyio.to_thread

            anyio.to_thread.current_default_thread_limiter().total_tokens = self.tokens
            self.loops.add(loop)
        await self.app(scope, receive, send)


def create_app(
    engine: SearchEngine,
    *,
    admin_token: str | None,
    max_query_chars: int | None = None,
    max_threads: int | None = None,
) -> FastAPI:
    """The FastAPI application serving ``engine``. ``admin_token=None`` disables admin routes.

    ``max_threads``: how many requests are handled at once (default: the engine's connection
    pool size, ``settings.pool_max``, when it has one; else anyio's 40). With 16 clients on
    the shipped catalog, capping at the pool size raised hybrid searches/s 1.3-1.5x."""
    query_cap = MAX_QUERY_CHARS if max_query_chars is None else max_query_chars
    if max_threads is None:
        max_threads = getattr(getattr(engine, "settings", None), "pool_max", None)
    token = admin_token.encode("utf-8") if admin_token else None
    app = FastAPI(
        title="pytest-searcheval reference engine",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )

    documents: dict[tuple[str, ...], dict[str, Any]] = {}

    def openapi_document() -> dict[str, Any]:
        # The routes never change after create_app; the profiles a client may ask for do (an
        # unavailable one answers 503 with its reason), so the document lists the usable ones.
        usable = tuple(p for p, reason in engine.profiles().items() if reason is None)
        if usable not in documents:
            from fastapi.openapi.utils import get_openapi

            from pytest_searcheval.engine import openapi

            documents[usable] = openapi.document(
                get_openapi(title=app.title, version=app.version, routes=app.routes),
                search_params=SEARCH_PARAMS,
                profiles=usable,
                query_cap=query_cap,
                max_limit=MAX_LIMIT,
                max_offset=MAX_OFFSET,
                max_id_chars=MAX_ID_CHARS,
                admin=token is not None,
            )
        return documents[usable]

    # FastAPI's documented way to serve a custom OpenAPI document; mypy forbids assigning a method.
    app.openapi = openapi_document  # type: ignore[method-assign]
    if max_threads is not None:
        app.add_middleware(_ThreadCap, tokens=max(1, max_threads))

    def error(status: int, field: str | None, message: str, **extra: Any) -> JSONResponse:
        body: dict[str, Any] = {"error": message, "field": field, **extra}
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(ClientError)
    def _client_error(request: Request, exc: ClientError) -> JSONResponse:
        return error(exc.status, exc.field, exc.message, **exc.extra)

    @app.exception_handler(FilterError)
    def _filter_error(request: Request, exc: FilterError) -> JSONResponse:
        return error(400, exc.field, exc.message)

    @app.exception_handler(StarletteHTTPException)
    def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = error(exc.status_code, None, str(exc.detail))
        for key, value in (exc.headers or {}).items():  # e.g. Allow on a 405
            response.headers[key] = value
        return response

    @app.exception_handler(RequestValidationError)
    def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("query", "path", "body")]
        return error(400, ".".join(loc) or None, str(first.get("msg", "invalid request")))

    @app.exception_handler(Exception)
    def _internal(request: Request, exc: Exception) -> JSONResponse:
        # Never the client's fault: log it, say so, leak nothing. A database that is down or a
        # pool with no free connection in time is a temporary outage (503), anything else a bug.
        if _is_database_outage(exc):
            log.warning("database unavailable serving %s: %s", request.url.path, exc)
            return error(503, None, f"database unavailable ({type(exc).__name__})")
        log.exception("unhandled error serving %s", request.url.path)
        return error(500, None, f"internal error ({type(exc).__name__})")

    def run_search(
        q: str,
        *,
        profile: str,
        limit: int,
        filters: Filters,
        extract: bool,
        name: Mapping[str, str],
        explain: bool = False,
    ) -> dict[str, Any]:
        """The engine's answer; its errors become client errors under the parameter ``name``
        gives each field of the engine's (``q`` -> ``query`` on the Bazaar route)."""
        # ``explain`` is passed only when asked for: an engine without explanations still fits.
        extra: dict[str, Any] = {"explain": True} if explain else {}
        try:
            return engine.search(
                q,
                profile=profile,
                limit=limit,
                filters=filters.to_dict(),
                extract=extract,
                **extra,
            )
        except FilterError as exc:
            raise ClientError(400, name.get(exc.field, exc.field), exc.message) from None
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            if field in name and message:
                raise ClientError(400, name[field], message) from None
            raise ClientError(400, None, str(exc)) from None
        except RuntimeError as exc:
            if type(exc).__name__ == "ProfileUnavailable":
                raise ClientError(
                    503, "profile", str(exc), {"profile": profile, "reason": str(exc)}
                ) from None
            raise

    native_names = {p: p for p in SEARCH_PARAMS}
    bazaar_names = {
        "q": "query",
        "profile": "profile",
        "limit": "limit",
        "extract": "extract",
        **{k: bazaar.filter_param(k) for k in FILTER_KEYS},
    }

    @app.get("/search")
    def search(request: Request) -> JSONResponse:
        params = _single(request.query_params.multi_items())
        q = _query(params.get("q"), query_cap)
        profile = _profile(params.get("profile"), engine.profiles())
        limit = _limit(params.get("limit"))
        extract = _flag(params.get("extract"), "extract", True)
        filters = parse_filters({k: params[k] for k in FILTER_KEYS if k in params}, engine.assets)
        body = run_search(
            q, profile=profile, limit=limit, filters=filters, extract=extract, name=native_names
        )
        return FastJSONResponse(body)

    @app.get("/discovery/search")
    def discovery_search(request: Request) -> Response:
        pairs = request.query_params.multi_items()
        names = {k for k, _ in pairs}
        if "q" in names and "query" not in names:
            # The engine's own parameter set moved to /search; clients of it are sent there.
            query_string = request.url.query
            return RedirectResponse(
                "/search" + (f"?{query_string}" if query_string else ""), status_code=308
            )
        params = _single(pairs, bazaar.SEARCH_PARAMS)
        query = _query(params.get("query"), query_cap, "query")
        profile = _profile(params.get("profile"), engine.profiles())
        limit = _limit(params.get("limit"))
        extract = _flag(params.get("extract"), "extract", True)
        explain = _flag(params.get("explain"), "explain", False)
        filters = _discovery_filters(params, engine.assets)
        search_id = bazaar.fingerprint(query, profile, filters.to_dict(), extract)
        offset = 0
        if "cursor" in params:
            try:
                offset = bazaar.decode_cursor(params["cursor"], search_id, MAX_LIMIT - 1)
            except bazaar.CursorError as exc:
                raise ClientError(400, "cursor", str(exc)) from None
        # One result past the page says whether a next page exists.
        wanted = min(offset + limit + 1, MAX_LIMIT)
        body = run_search(
            query,
            profile=profile,
            limit=wanted,
            filters=filters,
            extract=extract,
            name=bazaar_names,
            explain=explain,
        )
        page = bazaar.cut_page(body.get("results", []), offset, limit, MAX_LIMIT, search_id)
        out: dict[str, Any] = {
            "x402Version": bazaar.X402_VERSION,
            "resources": [
                bazaar.discovery_item(
                    str(row["id"]),
                    row.get("resource"),
                    score=row.get("score"),
                    **({"explanation": row["explanation"]} if "explanation" in row else {}),
                )
                for row in page.rows
            ],
            "partialResults": page.partial,
            "pagination": {"limit": limit, "cursor": page.cursor},
        }
        for key in bazaar.SEARCH_EXTRA_FIELDS:
            if key in body:
                out[key] = body[key]
        return FastJSONResponse(out)

    @app.get("/discovery/resources")
    def discovery_resources(request: Request) -> JSONResponse:
        params = _single(request.query_params.multi_items(), bazaar.LIST_PARAMS)
        limit = _limit(params.get("limit"), LIST_LIMIT_DEFAULT)
        offset = _offset(params.get("offset"))
        filters = _discovery_filters(params, engine.assets)
        try:
            page = engine.list_resources(filters=filters.to_dict(), limit=limit, offset=offset)
        except FilterError as exc:
            raise ClientError(400, bazaar.filter_param(exc.field), exc.message) from None
        return FastJSONResponse(
            {
                "x402Version": bazaar.X402_VERSION,
                "items": [
                    bazaar.discovery_item(str(row["id"]), row.get("resource"))
                    for row in page["items"]
                ],
                "pagination": {"limit": limit, "offset": offset, "total": page["total"]},
            }
        )

    @app.get("/healthz")
    def healthz() -> JSONResponse:
        # health(): one SELECT 1 within the connection wait, so a dead database answers 503 in
        # about a second; describe() (counts over every table) is for reports, not probes.
        probe = getattr(engine, "health", None) or engine.describe
        try:
            facts = probe()
        except Exception as exc:
            if _is_database_outage(exc):
                log.warning("health check: database unavailable: %s", exc)
            else:
                log.exception("health check failed")
            return JSONResponse(
                {"status": "error", "error": f"{type(exc).__name__}: {exc}"}, status_code=503
            )
        return JSONResponse(
            {
                "status": "ok",
                "profiles": dict(engine.profiles()),
                # what an evaluation of this service gates on unless told otherwise (the
                # plugin's HttpTarget.defaults reads it; the in-process targets say the same)
                "defaults": {"gated_profile": "hybrid", "gate_over": "lexical"},
                "postgres": facts.get("postgres"),
                "pgvector": facts.get("pgvector"),
                "model": facts.get("model"),
                "documents": facts.get("documents"),
            }
        )

    def authorize(request: Request) -> None:
        if token is None:
            raise ClientError(403, "Authorization", "admin routes are disabled: no token set")
        header = request.headers.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented:
            raise ClientError(401, "Authorization", "expected 'Authorization: Bearer <token>'")
        if not hmac.compare_digest(presented.strip().encode("utf-8"), token):
            raise ClientError(401, "Authorization", "invalid token")

    async def json_body(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            raise ClientError(413, "body", f"larger than {MAX_BODY_BYTES} bytes")
        # Read in chunks so that a body without a Content-Length cannot fill the memory.
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise ClientError(413, "body", f"larger than {MAX_BODY_BYTES} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            return json.loads(raw)
        except RecursionError:
            raise ClientError(400, "body", "JSON nested too deeply") from None
        except ValueError as exc:  # malformed JSON, bad UTF-8, an integer of 4,300+ digits
            raise ClientError(400, "body", f"expected a JSON document record: {exc}") from None

    @app.put("/admin/resources/{doc_id:path}")
    async def put_resource(doc_id: str, request: Request) -> JSONResponse:
        authorize(request)
        doc_id = _path_id(doc_id)
        record = await json_body(request)
        if not isinstance(record, dict):
            raise ClientError(400, "body", "expected a JSON object (a document record)")
        if "id" in record and record["id"] != doc_id:
            raise ClientError(
                400, "id", f"the body's id {str(record['id'])[:60]!r} differs from the path"
            )
        record = {**record, "id": doc_id}
        try:
            # The corpus loader's own check: what `collection check` accepts is what we store.
            checked_document(record)
        except RecordError as exc:
            raise ClientError(
                400,
                exc.field,
                exc.message,
                {"problems": [{"field": f, "error": m} for f, m in exc.problems]},
            ) from None
        try:
            await run_in_threadpool(engine.upsert, record)
        except (ValueError, TypeError, KeyError) as exc:
            field, _, message = str(exc).partition(": ")
            raise ClientError(400, "body", message or field) from None
        return JSONResponse({"id": doc_id, "status": "upserted"})

    @app.delete("/admin/resources/{doc_id:path}")
    async def delete_resource(doc_id: str, request: Request) -> JSONResponse:
        authorize(request)
        doc_id = _path_id(doc_id)
        existed = await run_in_threadpool(engine.delete, doc_id)
        if existed is False:
            raise ClientError(404, "id", f"no resource with id {doc_id[:60]!r}")
        return JSONResponse({"id": doc_id, "status": "deleted"})

    @app.post("/admin/reindex")
    async def reindex(request: Request) -> JSONResponse:
        authorize(request)
        await run_in_threadpool(engine.reindex)
        return JSONResponse({"status": "reindexed"})

    return app


def _is_database_outage(exc: BaseException) -> bool:
    import psycopg
    import psycopg_pool

    return isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout))
