"""``GET /search``: the engine's own parameter set and response body.

:func:`run_search` is the one call into ``engine.search`` (the discovery router uses it too):
it turns the engine's errors into client errors under the caller's parameter names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from pytest_searcheval.engine.api import context, params
from pytest_searcheval.engine.api.context import SearchEngine
from pytest_searcheval.engine.api.params import SEARCH_PARAMS, ClientError
from pytest_searcheval.engine.api.responses import FastJSONResponse
from pytest_searcheval.engine.x402 import FILTER_KEYS, FilterError, Filters, parse_filters

__all__ = ["NATIVE_NAMES", "router", "run_search"]

router = APIRouter()

#: the engine's field -> the parameter that carries it on /search (the same names)
NATIVE_NAMES: Mapping[str, str] = {p: p for p in SEARCH_PARAMS}


def run_search(
    engine: SearchEngine,
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


@router.get("/search")
def search(request: Request) -> JSONResponse:
    ctx = context.of(request)
    engine = ctx.engine
    given = params.single(request.query_params.multi_items())
    q = params.query(given.get("q"), ctx.query_cap)
    profile = params.profile(given.get("profile"), engine.profiles())
    limit = params.limit(given.get("limit"))
    extract = params.flag(given.get("extract"), "extract", True)
    filters = parse_filters({k: given[k] for k in FILTER_KEYS if k in given}, engine.assets)
    body = run_search(
        engine,
        q,
        profile=profile,
        limit=limit,
        filters=filters,
        extract=extract,
        name=NATIVE_NAMES,
    )
    return FastJSONResponse(body)
