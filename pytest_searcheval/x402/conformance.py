"""The filter-conformance set: listings and cases whose expected ids the independent oracle
must reproduce."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_searcheval.collection.io import (
    Problems,
    read_yaml,
    yaml_items,
)
from pytest_searcheval.collection.model import (
    Asset,
    Document,
)
from pytest_searcheval.collection.native import (
    read_corpus_files,
)
from pytest_searcheval.x402 import oracle as _constraints


@dataclass(frozen=True, slots=True)
class ConformanceCase:
    id: str
    filters: dict[str, Any]
    query: str
    expect_ids: frozenset[str]


@dataclass(frozen=True, slots=True)
class ConformanceSet:
    documents: dict[str, Document]
    cases: list[ConformanceCase]


def load_conformance(
    path: str | Path,
    assets: Sequence[Asset],
    *,
    check_oracle: bool = True,
) -> ConformanceSet:
    """Load ``conformance/corpus.jsonl`` + ``cases.yaml``. With ``check_oracle`` each case's
    expect_ids must equal the set the independent oracle computes; a difference is a problem
    (the hand-written expectation or the oracle is wrong, and a person must decide which)."""
    root = Path(path)
    problems = Problems()
    cpath, kpath = root / "corpus.jsonl", root / "cases.yaml"
    documents, _ = read_corpus_files([cpath] if cpath.exists() else [], root, problems)
    if not cpath.exists():
        problems.add("corpus.jsonl", None, None, "missing: expected the conformance listings")
    cases: list[ConformanceCase] = []
    name = "cases.yaml"
    node = read_yaml(kpath, problems, name) if kpath.exists() else None
    if not kpath.exists():
        problems.add(name, None, None, "missing: expected the conformance cases")
    seen: dict[str, int] = {}
    for item in yaml_items(node, problems, name, "cases"):
        rec, line = item.value, item.line
        if not isinstance(rec, dict):
            problems.add(name, line, None, "expected {id, filters, query, expect_ids}")
            continue
        cid = rec.get("id")
        filters = rec.get("filters") or {}
        expect = rec.get("expect_ids")
        ok = True
        if not isinstance(cid, str) or not cid:
            problems.add(name, line, "id", "expected a non-empty string")
            continue
        if cid in seen:
            problems.add(name, line, "id", f"duplicate case id {cid!r} (first on line {seen[cid]})")
            continue
        seen[cid] = line
        if not isinstance(filters, dict):
            problems.add(name, line, "filters", "expected a mapping of filters")
            continue
        for key, msg in _constraints.check_filters(filters, assets):
            problems.add(name, item.key_lines.get("filters", line), f"filters.{key}", msg)
            ok = False
        if not isinstance(rec.get("query", ""), str):
            problems.add(name, line, "query", "expected a string")
            ok = False
        if not isinstance(expect, list) or not all(isinstance(e, str) for e in expect):
            problems.add(name, line, "expect_ids", "expected a list of listing ids")
            continue
        for e in expect:
            if e not in documents:
                problems.add(name, line, "expect_ids", f"unknown listing {e!r}")
                ok = False
        if not ok:
            continue
        case = ConformanceCase(cid, dict(filters), str(rec.get("query", "")), frozenset(expect))
        if check_oracle:
            oracle = {
                d for d, doc in documents.items() if _constraints.satisfies(doc, filters, assets)
            }
            if oracle != case.expect_ids:
                problems.add(
                    name,
                    line,
                    "expect_ids",
                    f"case {cid}: oracle says {sorted(oracle)}, expect_ids says "
                    f"{sorted(case.expect_ids)} (missing {sorted(oracle - case.expect_ids)}, "
                    f"extra {sorted(case.expect_ids - oracle)})",
                )
        cases.append(case)
    problems.raise_if_any()
    return ConformanceSet(documents, cases)
