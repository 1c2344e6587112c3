"""The shipped collection stays what its provenance says it is."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FROZEN = ("id", "text", "class", "split", "source", "group", "constraints")


def test_golden_queries_are_unchanged_since_the_freeze() -> None:
    queries = yaml.safe_load((ROOT / "qrels/queries.yaml").read_text(encoding="utf-8"))
    frozen = [{key: query.get(key) for key in FROZEN} for query in queries]
    digest = hashlib.sha256(
        json.dumps(frozen, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    provenance = yaml.safe_load((ROOT / "qrels/provenance.yaml").read_text(encoding="utf-8"))
    assert digest == provenance["queries"]["frozen_fields_sha256"]


def test_every_known_item_is_judged_a_perfect_answer() -> None:
    queries = yaml.safe_load((ROOT / "qrels/queries.yaml").read_text(encoding="utf-8"))
    grades: dict[tuple[str, str], int] = {}
    for line in (ROOT / "qrels/judgments.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, grade = line.split("\t")
        grades[qid, doc] = int(grade)
    known = [(q["id"], q["expect"]["known_item"]) for q in queries if q["expect"].get("known_item")]
    assert len(known) == 40
    assert all(grades.get(pair) == 3 for pair in known)


def _catalog() -> list[dict[str, object]]:
    text = (ROOT / "corpus/catalog.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.slow  # 525 listings through the x402 SDK's validators
def test_every_listing_is_what_a_bazaar_facilitator_stores() -> None:
    """The official x402 SDK's facilitator side, run again on every shipped wire object, accepts
    it and would store exactly it (construction/build_corpus.py --check does the same)."""
    from pytest_searcheval.x402.bazaar import WIRE_FIELDS, refusals

    listings = _catalog()
    problems = [f"{d['id']}: {p}" for d in listings for p in refusals(d["x402"])]  # type: ignore[arg-type]
    assert problems == []
    assert len(listings) == 525
    for d in listings:
        wire = d["x402"]
        assert isinstance(wire, dict) and set(wire) <= set(WIRE_FIELDS)
        declared = wire["extensions"]["bazaar"]
        assert declared["schema"]["properties"]["input"], d["id"]
        assert declared["info"]["input"]["type"] == wire["type"]


def test_the_sdk_refuses_what_a_facilitator_would_not_store() -> None:
    """Each tampering is one the SDK catches, so the check above can fail."""
    from pytest_searcheval.x402.bazaar import refusals

    listings = {d["id"]: d["x402"] for d in _catalog()}
    http = json.loads(json.dumps(listings["almanac-climate-normals"]))
    http["extensions"]["bazaar"]["info"]["input"]["queryParams"] = {"lat": "north"}
    assert any("not of type 'number'" in p for p in refusals(http))
    mcp = json.loads(json.dumps(next(w for w in listings.values() if w["type"] == "mcp")))
    del mcp["extensions"]["bazaar"]["info"]["input"]["toolName"]
    assert refusals(mcp)
    extra = dict(listings["almanac-climate-normals"], inputSchema={})
    assert refusals(extra) == ["not a field of a discovered resource: inputSchema"]
    missing = dict(listings["almanac-climate-normals"], extensions={})
    assert any("no bazaar extension" in p for p in refusals(missing))
    relabelled = dict(listings["almanac-climate-normals"], type="mcp")
    assert any("type" in p for p in refusals(relabelled))
    ref = json.loads(json.dumps(listings["almanac-climate-normals"]))
    ref["extensions"]["bazaar"]["schema"]["$ref"] = "https://evil.example/schema.json"
    assert any("external" in p for p in refusals(ref))


def test_core_modules_never_import_the_x402_sdk() -> None:
    """The SDK is the x402 extra's: importing the core, the plugin and the targets loads none
    of it (the x402 layer and the Bazaar target import it inside their functions)."""
    import subprocess
    import sys

    code = (
        "import sys, pytest_searcheval.plugin, pytest_searcheval.targets,"
        " pytest_searcheval.targets.bazaar, pytest_searcheval.targets.default,"
        " pytest_searcheval.x402.bazaar,"
        " pytest_searcheval.engine.app, pytest_searcheval.engine.bazaar;"
        "print(sorted(m for m in sys.modules if m == 'x402' or m.startswith('x402.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"
