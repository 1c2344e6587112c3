"""``PUT /admin/resources/{id}``, ``DELETE /admin/resources/{id}``, ``POST /admin/reindex``.

Each needs ``Authorization: Bearer <token>`` (compared in constant time); without a configured
token they answer 403. A PUT body is read in chunks up to ``MAX_BODY_BYTES`` and checked by
the corpus loader's own record check before the engine stores it.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from pytest_searcheval.collection.native import RecordError, checked_document
from pytest_searcheval.engine.api import context, params
from pytest_searcheval.engine.api.context import ServiceContext
from pytest_searcheval.engine.api.params import MAX_BODY_BYTES, ClientError

__all__ = ["authorize", "is_json", "json_body", "router"]

router = APIRouter()


def authorize(ctx: ServiceContext, request: Request) -> None:
    """Refuse the request unless it carries the admin token (403 when admin is disabled)."""
    if ctx.token is None:
        raise ClientError(403, "Authorization", "admin routes are disabled: no token set")
    header = request.headers.get("authorization", "")
    scheme, _, presented = header.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        raise ClientError(401, "Authorization", "expected 'Authorization: Bearer <token>'")
    if not hmac.compare_digest(presented.strip().encode("utf-8"), ctx.token):
        raise ClientError(401, "Authorization", "invalid token")


def is_json(content_type: str) -> bool:
    """``application/json`` or a ``+json`` type, with any parameters."""
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def json_body(request: Request) -> Any:
    """The request's JSON body, at most ``MAX_BODY_BYTES`` (413 beyond, 400 when malformed,
    415 when it declares a type other than JSON; a body without ``Content-Type`` is read as
    JSON)."""
    content_type = request.headers.get("content-type")
    if content_type is not None and not is_json(content_type):
        raise ClientError(
            415,
            "Content-Type",
            f"expected application/json, not {content_type[:60]!r}",
        )
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


@router.put("/admin/resources/{doc_id:path}")
async def put_resource(doc_id: str, request: Request) -> JSONResponse:
    ctx = context.of(request)
    authorize(ctx, request)
    doc_id = params.path_id(doc_id, request.scope.get("raw_path"))
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
        await run_in_threadpool(ctx.engine.upsert, record)
    except (ValueError, TypeError, KeyError) as exc:
        field, _, message = str(exc).partition(": ")
        raise ClientError(400, "body", message or field) from None
    return JSONResponse({"id": doc_id, "status": "upserted"})


@router.delete("/admin/resources/{doc_id:path}")
async def delete_resource(doc_id: str, request: Request) -> JSONResponse:
    ctx = context.of(request)
    authorize(ctx, request)
    doc_id = params.path_id(doc_id, request.scope.get("raw_path"))
    existed = await run_in_threadpool(ctx.engine.delete, doc_id)
    if existed is False:
        raise ClientError(404, "id", f"no resource with id {doc_id[:60]!r}")
    return JSONResponse({"id": doc_id, "status": "deleted"})


@router.post("/admin/reindex")
async def reindex(request: Request) -> JSONResponse:
    ctx = context.of(request)
    authorize(ctx, request)
    await run_in_threadpool(ctx.engine.reindex)
    return JSONResponse({"status": "reindexed"})
