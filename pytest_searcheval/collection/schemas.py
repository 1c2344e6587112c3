"""JSON Schemas of the native formats, shipped in the package."""

from __future__ import annotations

import json
from typing import Any

SCHEMAS = (
    "collection",
    "document",
    "queries",
    "filters",
    "judgment-row",
    "conformance-cases",
)


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a native format, shipped in the package:
    collection (collection.yaml), document (a corpus line), queries (queries.yaml), filters,
    judgment-row (a judgments.tsv row as an object), conformance-cases (cases.yaml).
    The loader enforces more than the schemas can say (checksums, cross-references)."""
    from importlib.resources import files

    if name not in SCHEMAS:
        raise KeyError(f"unknown schema {name!r}: expected one of {', '.join(SCHEMAS)}")
    text = files("pytest_searcheval").joinpath("schemas", f"{name}.schema.json").read_text("utf-8")
    value: dict[str, Any] = json.loads(text)
    return value
