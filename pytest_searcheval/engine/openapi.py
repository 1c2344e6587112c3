"""The OpenAPI document the service publishes at ``/openapi.json``.

The handlers read their parameters themselves (to answer every bad value with a 4xx naming the
parameter), so FastAPI cannot see them; this module describes them from the same tuples the
handlers check against (``SEARCH_PARAMS``, ``bazaar.SEARCH_PARAMS``, ``bazaar.LIST_PARAMS``),
each hard filter with its vocabulary (an enum of the types, networks, schemes and registered
assets; the pattern of a recipient, a price ceiling and an extension name), the request body
of ``PUT /admin/resources/{id}`` from the shipped document schema, and the
error body every 4xx and 5xx carries. A schema-driven fuzzer (schemathesis, ``nox -s
schemathesis``) is pointed at this document.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_searcheval.engine import bazaar
from pytest_searcheval.engine.settings import PROFILES
from pytest_searcheval.engine.x402 import (
    EXTENSION_PATTERN,
    FILTER_KEYS,
    MAX_PRICE_CHARS,
    NETWORKS,
    PRICE_PATTERN,
    SCHEMES,
    TYPES,
)

__all__ = ["document", "filter_schema"]

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "what was expected"},
        "field": {"type": ["string", "null"], "description": "the parameter or field at fault"},
    },
}

_COUNT = {"type": "integer", "minimum": 0}

#: what ``embeddings`` in ``/healthz`` holds (docs/report.md, "Embedding counts")
EMBEDDINGS = {
    "type": "object",
    "description": "embedding completeness of the live catalog",
    "required": ["listings", "embedded", "failed", "fallback", "reasons"],
    "properties": {
        "listings": {**_COUNT, "description": "live listings indexed"},
        "embedded": {**_COUNT, "description": "listings with a stored embedding"},
        "failed": {**_COUNT, "description": "listings whose embedding failed"},
        "fallback": {**_COUNT, "description": "listings served without their embedding"},
        "reasons": {
            "type": "object",
            "additionalProperties": _COUNT,
            "description": "reason class of a failure -> listings",
        },
        "last_write": {
            "type": ["object", "null"],
            "description": "the same counts for the last write that embedded",
            "properties": {
                "operation": {"type": "string", "enum": ["seed", "upsert", "reindex"]},
                "listings": _COUNT,
                "embedded": _COUNT,
                "failed": _COUNT,
                "reasons": {"type": "object", "additionalProperties": _COUNT},
            },
        },
    },
}

HEALTH = {
    "type": "object",
    "required": ["status"],
    "properties": {
        "status": {"type": "string", "enum": ["ok"]},
        "profiles": {
            "type": "object",
            "additionalProperties": {"type": ["string", "null"]},
            "description": "profile -> null when usable, else why it is unavailable",
        },
        "defaults": {"type": "object"},
        "documents": {**_COUNT, "description": "live listings"},
        "embeddings": EMBEDDINGS,
    },
}

_STATUS_TEXT = {
    "308": "the engine's own parameter set (q=...) moved to /search",
    "400": "a parameter or field is invalid; `field` names it",
    "401": "missing or wrong bearer token",
    "403": "admin routes are disabled (no token configured)",
    "404": "no such resource",
    "413": "body larger than the limit",
    "503": "the profile is unavailable, or the database is (retry later)",
}


def filter_schema(key: str, assets: Sequence[str]) -> dict[str, Any]:
    """The schema of hard filter ``key``: its vocabulary as an enum where it is a closed one
    (type, network, scheme, the registered assets), else the pattern the handler checks."""
    described = {"type": "string", "description": f"hard filter {key} (docs/engine.md)"}
    if key in ("type", "network", "scheme"):
        return {
            **described,
            "enum": list({"type": TYPES, "network": NETWORKS, "scheme": SCHEMES}[key]),
        }
    if key == "asset":
        # a registered code or contract address; with none registered every value is refused
        return {**described, "enum": list(assets)} if assets else described
    if key == "recipient":
        # a G, M or C strkey (its checksum is checked by the handler, not the pattern)
        return {**described, "pattern": "^(?:[GC][A-Z2-7]{55}|M[A-Z2-7]{68})$"}
    if key == "max_price_usd":
        return {**described, "pattern": f"^{PRICE_PATTERN}$", "maxLength": MAX_PRICE_CHARS}
    if key == "extension":
        return {**described, "pattern": f"^{EXTENSION_PATTERN}$"}
    return described


def _param(
    name: str,
    *,
    profiles: Sequence[str],
    assets: Sequence[str],
    query_cap: int,
    max_limit: int,
    max_offset: int,
) -> dict[str, Any]:
    schema: dict[str, Any]
    key = name if name in FILTER_KEYS else bazaar.filter_key(name)
    if name in ("q", "query"):
        schema = {"type": "string", "minLength": 1, "maxLength": query_cap}
    elif name == "limit":
        schema = {"type": "integer", "minimum": 1, "maximum": max_limit}
    elif name == "offset":
        schema = {"type": "integer", "minimum": 0, "maximum": max_offset - 1}
    elif name in ("extract", "explain"):
        schema = {"type": "boolean"}
    elif name == "profile":
        schema = {"type": "string", "enum": list(profiles)}
    elif name == "cursor":
        schema = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}
    elif key is not None:
        schema = filter_schema(key, assets)
    else:
        schema = {"type": "string"}
    return {
        "name": name,
        "in": "query",
        "required": name in ("q", "query"),
        "schema": schema,
    }


def _responses(
    ok: str, statuses: Sequence[str], body: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    schema = dict(body) if body is not None else {"type": "object"}
    out: dict[str, Any] = {
        "200": {"description": ok, "content": {"application/json": {"schema": schema}}}
    }
    for status in statuses:
        answer: dict[str, Any] = {"description": _STATUS_TEXT[status]}
        if status != "308":
            ref = {"$ref": "#/components/schemas/Error"}
            answer["content"] = {"application/json": {"schema": ref}}
        out[status] = answer
    return out


def _record_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """The document schema as a request body: its $defs become components (refs rewritten),
    the id is optional (the path carries it)."""
    from pytest_searcheval.collection.schemas import schema

    doc = copy.deepcopy(schema("document"))
    defs = doc.pop("$defs", {})
    for key in ("$schema", "$id"):
        doc.pop(key, None)
    doc["required"] = [r for r in doc.get("required", []) if r != "id"]

    def rewrite(value: Any) -> Any:
        if isinstance(value, dict):
            out = {k: rewrite(v) for k, v in value.items()}
            ref = out.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                out["$ref"] = "#/components/schemas/Document_" + ref[len("#/$defs/") :]
            return out
        if isinstance(value, list):
            return [rewrite(v) for v in value]
        return value

    components = {f"Document_{name}": rewrite(body) for name, body in defs.items()}
    return rewrite(doc), components


def document(
    base: Mapping[str, Any],
    *,
    search_params: Sequence[str],
    profiles: Sequence[str] = PROFILES,
    assets: Sequence[str] = (),
    query_cap: int,
    max_limit: int,
    max_offset: int,
    max_id_chars: int,
    admin: bool,
) -> dict[str, Any]:
    """``base`` (FastAPI's generated document) with every operation's parameters, bodies,
    responses and security filled in; ``profiles`` are the ones a client may name, ``assets``
    the codes and contract addresses the asset filter accepts."""
    spec = copy.deepcopy(dict(base))
    limits: dict[str, Any] = {
        "profiles": profiles,
        "assets": assets,
        "query_cap": query_cap,
        "max_limit": max_limit,
        "max_offset": max_offset,
    }
    record, record_defs = _record_schema()
    components = spec.setdefault("components", {})
    components.setdefault("schemas", {}).update({"Error": ERROR, "Health": HEALTH, **record_defs})
    components["schemas"]["DocumentRecord"] = record
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
    doc_id = {
        "name": "doc_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "minLength": 1, "maxLength": max_id_chars},
    }
    admin_errors = ["400", "401", "403", "503"]
    table: dict[tuple[str, str], dict[str, Any]] = {
        ("get", "/search"): {
            "parameters": [_param(p, **limits) for p in search_params],
            "responses": _responses("the engine's response body", ["400", "503"]),
        },
        ("get", "/discovery/search"): {
            "parameters": [_param(p, **limits) for p in bazaar.SEARCH_PARAMS],
            "responses": _responses("x402 Bazaar search results", ["308", "400", "503"]),
        },
        ("get", "/discovery/resources"): {
            "parameters": [_param(p, **limits) for p in bazaar.LIST_PARAMS],
            "responses": _responses("x402 Bazaar resource list", ["400", "503"]),
        },
        ("get", "/healthz"): {
            "parameters": [],
            "responses": _responses("healthy", ["503"], {"$ref": "#/components/schemas/Health"}),
        },
        ("put", "/admin/resources/{doc_id}"): {
            "parameters": [doc_id],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/DocumentRecord"}}
                },
            },
            "responses": _responses("upserted", [*admin_errors, "413"]),
            "security": [{"bearer": []}],
        },
        ("delete", "/admin/resources/{doc_id}"): {
            "parameters": [doc_id],
            "responses": _responses("deleted (tombstoned)", [*admin_errors, "404"]),
            "security": [{"bearer": []}],
        },
        ("post", "/admin/reindex"): {
            "parameters": [],
            "responses": _responses("reindexed", ["401", "403", "503"]),
            "security": [{"bearer": []}],
        },
    }
    paths: dict[str, Any] = spec.setdefault("paths", {})
    for (method, path), fields in table.items():
        op = paths.get(path, {}).get(method)
        if op is None:
            continue
        if path.startswith("/admin/") and not admin:
            fields = {**fields, "responses": _responses("never: admin is disabled", ["403"])}
        op.pop("requestBody", None)
        op.update(fields)
    return spec
