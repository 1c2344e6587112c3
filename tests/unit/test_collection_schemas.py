from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from pytest_searcheval.collection import CollectionError, load, schema
from pytest_searcheval.collection import validator as collection_validator
from pytest_searcheval.collection.native import DOCUMENT_KEYS, EXPECT_KEYS, QUERY_KEYS
from pytest_searcheval.collection.schemas import SCHEMAS
from pytest_searcheval.x402.oracle import FILTER_KEYS
from pytest_searcheval.x402.synth import write_synthetic


def validator(name: str) -> Draft202012Validator:
    v: Draft202012Validator = collection_validator(name)
    return v


@pytest.mark.parametrize("name", SCHEMAS)
def test_no_reference_can_reach_the_network(name: str) -> None:
    """Every $ref names a shipped schema by URN; a plain validator with no registry resolves
    none of them remotely (a URN has no host to look up)."""
    text = json.dumps(schema(name))
    refs = [r for r in text.split('"$ref": "')[1:]]
    for ref in refs:
        target = ref.split('"', 1)[0]
        assert target.startswith(("#", "urn:pytest-searcheval:schema:")), target
    assert "http" not in schema(name)["$id"]


def test_the_validator_resolves_among_the_shipped_schemas_only() -> None:
    from referencing.exceptions import Unresolvable

    # constraints -> filters.schema.json -> document.schema.json#/$defs/strkey, all resolved
    query = {"id": "q", "text": "t", "class": "paraphrase", "split": "dev"}
    bad = [{**query, "constraints": {"recipient": "not-an-address"}}]
    paths = [list(e.absolute_path) for e in validator("queries").iter_errors(bad)]
    assert paths == [[0, "constraints"]], paths
    paths = [list(e.absolute_path) for e in validator("filters").iter_errors(bad[0]["constraints"])]
    assert paths == [["recipient"]], paths
    assert not list(validator("queries").iter_errors([query]))
    foreign = collection_validator("queries").evolve(
        schema={"$ref": "https://schemas.example/elsewhere.json"}
    )
    with pytest.raises(Unresolvable):
        foreign.validate({})


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_are_valid_draft_2020_12(name: str) -> None:
    Draft202012Validator.check_schema(schema(name))


def test_schemas_name_exactly_the_keys_the_loader_accepts() -> None:
    assert set(schema("document")["properties"]) == DOCUMENT_KEYS
    query = schema("queries")["$defs"]["query"]
    assert set(query["properties"]) == QUERY_KEYS
    assert tuple(query["properties"]["expect"]["properties"]) == EXPECT_KEYS
    assert tuple(schema("filters")["properties"]) == FILTER_KEYS
    with pytest.raises(KeyError):
        schema("nope")


def test_a_collection_the_loader_accepts_validates_against_the_schemas(tmp_path: Path) -> None:
    root = write_synthetic(tmp_path, n_docs=60, n_queries=6)
    load(root)
    docs = validator("document")
    for path in (root / "corpus").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            docs.validate(json.loads(line))
    validator("queries").validate(yaml.safe_load((root / "qrels/queries.yaml").read_text()))
    validator("collection").validate(yaml.safe_load((root / "collection.yaml").read_text()))


BAD_DOCS: list[dict[str, Any]] = [
    {"id": "", "text": "t"},
    {"id": "x", "text": 5},
    {"id": "x", "text": "t", "colour": "red"},
    {"id": "x", "text": "t", "x402": {"resource": "r", "type": "ftp", "accepts": []}},
    {
        "id": "x",
        "text": "t",
        "x402": {
            "resource": "r",
            "type": "http",
            "accepts": [
                {"scheme": "exact", "network": "n", "asset": "a", "amount": "1.5", "payTo": "G"}
            ],
        },
    },
]


@pytest.mark.parametrize("record", BAD_DOCS)
def test_records_the_schema_refuses_the_loader_refuses_too(
    record: dict[str, Any], tmp_path: Path
) -> None:
    assert list(validator("document").iter_errors(record))
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "c.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(CollectionError) as info:
        load(tmp_path)
    assert any(p.file == "corpus/c.jsonl" and p.line == 1 for p in info.value.problems)
