"""``GET /healthz``: whether the service can answer, and what it serves."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse

from pytest_searcheval.engine.api import context
from pytest_searcheval.engine.api.errors import is_database_outage, outage_log

__all__ = ["router"]

router = APIRouter()

log = logging.getLogger("pytest_searcheval.engine.app")


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    engine = context.of(request).engine
    # health(): one SELECT 1 within the connection wait, so a dead database answers 503 in
    # about a second; describe() (counts over every table) is for reports, not probes.
    probe = getattr(engine, "health", None) or engine.describe
    try:
        facts = probe()
    except Exception as exc:
        if is_database_outage(exc):
            outage_log.warn(request.url.path, exc)
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
            # embedding completeness (docs/report.md, "Embedding counts"): the report's
            # quality.embeddings and the gate rule "no embedding fallback" read it
            "embeddings": facts.get("embeddings"),
        }
    )
