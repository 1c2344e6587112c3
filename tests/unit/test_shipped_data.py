"""The shipped collection stays what its provenance says it is."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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
