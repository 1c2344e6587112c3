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


def validator(name: str) -> Any:
    """A ``jsonschema`` validator of a native format that resolves every ``$ref`` among the
    shipped schemas and never fetches anything: the schemas name each other by URN
    (``urn:pytest-searcheval:schema:<name>``), and any other reference is an error, not a
    network request. Needs the ``jsonschema`` package (the ``test`` extra)."""
    try:
        from jsonschema import Draft202012Validator
        from referencing import Registry, Resource
        from referencing.exceptions import NoSuchResource
    except ImportError as exc:  # pragma: no cover - the test extra brings it
        raise ImportError(
            "validating against the shipped schemas needs jsonschema: "
            "pip install 'pytest-searcheval[test]' (or jsonschema)"
        ) from exc

    def offline(uri: str) -> Any:
        # referencing's attrs classes take their private fields by alias (ref=, retrieve=), as
        # its documentation shows; mypy's attrs plugin does not see the aliases.
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    registry: Any = Registry(retrieve=offline).with_resources(  # type: ignore[call-arg]
        (schema(n)["$id"], Resource.from_contents(schema(n))) for n in SCHEMAS
    )
    return Draft202012Validator(schema(name), registry=registry)
