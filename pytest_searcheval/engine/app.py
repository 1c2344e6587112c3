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

The handlers live in one router per concern (:mod:`pytest_searcheval.engine.api`: search,
discovery, health, admin); :func:`create_app` only assembles them, with the engine and the
settings they share on ``app.state.context``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from pytest_searcheval.engine.api import admin, discovery, errors, health, search
from pytest_searcheval.engine.api.capacity import Capacity
from pytest_searcheval.engine.api.context import SearchEngine, ServiceContext
from pytest_searcheval.engine.api.params import (
    MAX_BODY_BYTES,
    MAX_ID_CHARS,
    MAX_LIMIT,
    MAX_OFFSET,
    MAX_QUERY_CHARS,
    SEARCH_PARAMS,
)
from pytest_searcheval.engine.api.responses import FastJSONResponse

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "SEARCH_PARAMS",
    "FastJSONResponse",
    "SearchEngine",
    "create_app",
]


def create_app(
    engine: SearchEngine,
    *,
    admin_token: str | None,
    max_query_chars: int | None = None,
    max_threads: int | None = None,
) -> FastAPI:
    """The FastAPI application serving ``engine``. ``admin_token=None`` disables admin routes.

    ``max_threads``: how many requests of each class (database work, or served from memory:
    engine/api/capacity.py) are handled at once (default: the engine's connection pool size,
    ``settings.pool_max``, when it has one; else anyio's 40 in all). With 16 clients on the
    shipped catalog, capping at the pool size raised hybrid searches/s 1.3-1.5x."""
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
    app.state.context = ServiceContext(engine=engine, query_cap=query_cap, token=token)
    for router in (search.router, discovery.router, health.router, admin.router):
        app.include_router(router)
    errors.install(app)
    # FastAPI's documented way to serve a custom OpenAPI document; mypy forbids assigning a method.
    app.openapi = _openapi_document(app, engine, query_cap, admin=token is not None)  # type: ignore[method-assign]
    if max_threads is not None:
        app.add_middleware(Capacity, tokens=max(1, max_threads), engine=engine)
    return app


def _openapi_document(app: FastAPI, engine: SearchEngine, query_cap: int, *, admin: bool) -> Any:
    """``app.openapi``: the document of the routes, built once per set of usable profiles."""
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
                assets=_asset_names(engine),
                query_cap=query_cap,
                max_limit=MAX_LIMIT,
                max_offset=MAX_OFFSET,
                max_id_chars=MAX_ID_CHARS,
                admin=admin,
            )
        return documents[usable]

    return openapi_document


def _asset_names(engine: SearchEngine) -> list[str]:
    """What the asset filter accepts: every registered code and contract address, sorted."""
    return sorted({a.code for a in engine.assets} | {a.address for a in engine.assets})
