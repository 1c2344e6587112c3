"""``GET /discovery/search`` and ``GET /discovery/resources``: x402 Bazaar discovery as the
official SDK's client speaks it, with the engine's extra parameters and fields
(:mod:`pytest_searcheval.engine.bazaar`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from pytest_searcheval.engine import bazaar
from pytest_searcheval.engine.api import context, params
from pytest_searcheval.engine.api.params import LIST_LIMIT_DEFAULT, MAX_LIMIT, ClientError
from pytest_searcheval.engine.api.responses import FastJSONResponse
from pytest_searcheval.engine.api.search import run_search
from pytest_searcheval.engine.x402 import FILTER_KEYS, FilterError

__all__ = ["BAZAAR_NAMES", "router"]

router = APIRouter()

#: the engine's field -> the Bazaar parameter that carries it
BAZAAR_NAMES: Mapping[str, str] = {
    "q": "query",
    "profile": "profile",
    "limit": "limit",
    "extract": "extract",
    **{k: bazaar.filter_param(k) for k in FILTER_KEYS},
}


@router.get("/discovery/search")
def discovery_search(request: Request) -> Response:
    ctx = context.of(request)
    engine = ctx.engine
    pairs = request.query_params.multi_items()
    names = {k for k, _ in pairs}
    if "q" in names and "query" not in names:
        # The engine's own parameter set moved to /search; clients of it are sent there.
        query_string = request.url.query
        return RedirectResponse(
            "/search" + (f"?{query_string}" if query_string else ""), status_code=308
        )
    given = params.single(pairs, bazaar.SEARCH_PARAMS)
    query = params.query(given.get("query"), ctx.query_cap, "query")
    profile = params.profile(given.get("profile"), engine.profiles())
    limit = params.limit(given.get("limit"))
    extract = params.flag(given.get("extract"), "extract", True)
    explain = params.flag(given.get("explain"), "explain", False)
    filters = params.discovery_filters(given, engine.assets)
    search_id = bazaar.fingerprint(query, profile, filters.to_dict(), extract)
    offset = 0
    if "cursor" in given:
        try:
            offset = bazaar.decode_cursor(given["cursor"], search_id, MAX_LIMIT - 1)
        except bazaar.CursorError as exc:
            raise ClientError(400, "cursor", str(exc)) from None
    # One result past the page says whether a next page exists.
    wanted = min(offset + limit + 1, MAX_LIMIT)
    body = run_search(
        engine,
        query,
        profile=profile,
        limit=wanted,
        filters=filters,
        extract=extract,
        name=BAZAAR_NAMES,
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


@router.get("/discovery/resources")
def discovery_resources(request: Request) -> JSONResponse:
    engine = context.of(request).engine
    given = params.single(request.query_params.multi_items(), bazaar.LIST_PARAMS)
    limit = params.limit(given.get("limit"), LIST_LIMIT_DEFAULT)
    offset = params.offset(given.get("offset"))
    filters = params.discovery_filters(given, engine.assets)
    try:
        page = engine.list_resources(filters=filters.to_dict(), limit=limit, offset=offset)
    except FilterError as exc:
        raise ClientError(400, bazaar.filter_param(exc.field), exc.message) from None
    return FastJSONResponse(
        {
            "x402Version": bazaar.X402_VERSION,
            "items": [
                bazaar.discovery_item(str(row["id"]), row.get("resource")) for row in page["items"]
            ],
            "pagination": {"limit": limit, "offset": offset, "total": page["total"]},
        }
    )
