"""Loader and validator of the native collection layout (see docs/formats.md).

Every problem is collected before anything is returned; a collection with any problem raises
``CollectionError`` and nothing is loaded partially.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pytest_searcheval.collection.io import (
    DEFAULT_MAX_LINE_BYTES,
    Problems,
    construct,
    display,
    iter_jsonl,
    iter_lines,
    key_lines_of,
    read_yaml,
    yaml_items,
)
from pytest_searcheval.collection.model import Asset, Document, Query
from pytest_searcheval.collection.records import MAX_ID_CHARS, value_problems
from pytest_searcheval.domain import Domain, asset_domain, known, named, owning
from pytest_searcheval.domain import get as get_domain

__all__ = [
    "DEFAULT_GRADES",
    "DEFAULT_SPLITS",
    "DOCUMENT_KEYS",
    "EXPECT_KEYS",
    "QUERY_KEYS",
    "RecordError",
    "check_queries",
    "checked_document",
    "read_judgments_tsv",
    "read_manifest",
    "validate_document",
]

DEFAULT_GRADES = [0, 1, 2, 3]
DEFAULT_SPLITS = ["dev", "test"]
DOCUMENT_KEYS = frozenset({"id", "title", "text", "fields", "x402", "sidecar"})
QUERY_KEYS = frozenset({"id", "text", "class", "split", "source", "group", "constraints", "expect"})
EXPECT_KEYS = ("known_item", "max_rank", "must_include", "no_result")
JUDGMENT_HEADER = ("query_id", "doc_id", "grade")


def _decimal_text(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    if not str(value).isascii():  # Decimal() reads other scripts' digits; prices are ASCII
        return None
    try:
        d = Decimal(str(value))
    except InvalidOperation:
        return None
    return d if d.is_finite() and d >= 0 else None


def read_manifest(path: Path, problems: Problems, root: Path) -> tuple[dict[str, Any], list[Asset]]:
    """collection.yaml: name, version, grades, splits, classes, price_snapshot, assets."""
    name = display(path, root)
    node = read_yaml(path, problems, name)
    if node is None:
        return {}, []
    data = construct(node, problems, name)
    lines = key_lines_of(node)
    if not isinstance(data, dict):
        problems.add(name, 1, None, "expected a YAML mapping (name, version, grades, ...)")
        return {}, []
    manifest: dict[str, Any] = dict(data)
    for key, kind in (("name", str), ("version", (int, str))):
        if key not in data:
            problems.add(name, None, key, f"missing required key {key!r}")
        elif not isinstance(data[key], kind) or isinstance(data[key], bool):
            problems.add(
                name,
                lines.get(key),
                key,
                f"expected {'a string' if kind is str else 'an integer or string'}",
            )
    grades = data.get("grades", DEFAULT_GRADES)
    if not (isinstance(grades, list) and grades and all(type(g) is int for g in grades)):
        problems.add(name, lines.get("grades"), "grades", "expected a non-empty list of integers")
        grades = DEFAULT_GRADES
    manifest["grades"] = sorted(set(grades))
    for key, default in (("splits", DEFAULT_SPLITS), ("classes", None)):
        value = data.get(key, default)
        if value is None:
            continue
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            problems.add(name, lines.get(key), key, "expected a non-empty list of strings")
            value = default
        elif "all" in value:
            problems.add(name, lines.get(key), key, "'all' is reserved (it means every split)")
        manifest[key] = value
    declared = data.get("domain")
    if declared is not None and (not isinstance(declared, str) or declared not in known()):
        problems.add(
            name,
            lines.get("domain"),
            "domain",
            f"unknown domain {declared!r}: expected one of {', '.join(known())}",
        )
        manifest.pop("domain")
    judge = asset_domain(manifest)
    assets: list[Asset] = []
    raw_assets = data.get("assets", [])
    if not isinstance(raw_assets, list):
        problems.add(name, lines.get("assets"), "assets", "expected a list of assets")
        raw_assets = []
    asset_nodes = _child_nodes(node, "assets")
    seen: dict[tuple[str, str], int] = {}
    for i, a in enumerate(raw_assets):
        line = asset_nodes[i] if i < len(asset_nodes) else lines.get("assets")
        f = f"assets[{i}]"
        if not isinstance(a, dict):
            problems.add(
                name, line, f, "expected a mapping {code, network, address, decimals, usd}"
            )
            continue
        ok = True
        for key in ("code", "network", "address"):
            if not isinstance(a.get(key), str) or not a.get(key):
                problems.add(name, line, f"{f}.{key}", "expected a non-empty string")
                ok = False
        dec = a.get("decimals")
        if type(dec) is not int or not 0 <= dec <= 38:
            problems.add(name, line, f"{f}.decimals", f"expected an integer 0..38, got {dec!r}")
            ok = False
        usd = None
        if a.get("usd") is not None:
            usd = _decimal_text(a["usd"])
            if usd is None:
                problems.add(name, line, f"{f}.usd", f"expected a decimal string, got {a['usd']!r}")
                ok = False
        if judge is not None:
            for field, message in judge.asset_problems(a):
                problems.add(name, line, f"{f}.{field}", message)
                ok = False
        if ok:
            k = (a["network"], a["address"])
            if k in seen:
                problems.add(name, line, f, f"duplicate asset {k} (first at assets[{seen[k]}])")
            seen[k] = i
            assets.append(Asset(a["code"], a["network"], a["address"], int(dec or 0), usd))
    return manifest, assets


def _child_nodes(node: Any, key: str) -> list[int]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return []
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key and isinstance(v, yaml.SequenceNode):
            return [c.start_mark.line + 1 for c in v.value]
    return []


def validate_document(
    rec: Mapping[str, Any], name: str, line: int, problems: Problems
) -> Document | None:
    """Check one native corpus record; returns the Document or None (problems reported).

    The same check serves the engine's ``PUT /admin/resources/{id}``: what passes here the
    engine can store (value limits in collection/records.py; the sidecar keys the engine reads,
    ``liveness`` and ``settlements``, typed).
    """
    bad = list(value_problems(rec))
    for key, message in bad:
        problems.add(name, line, key, message)
    if bad:
        return None
    ok = True
    if not DOCUMENT_KEYS.issuperset(rec):
        expected = ", ".join(sorted(DOCUMENT_KEYS))
        for key in rec:
            if key not in DOCUMENT_KEYS:
                problems.add(name, line, key, f"unknown key: expected {expected}")
        ok = False
    doc_id = rec.get("id")
    if not isinstance(doc_id, str) or not doc_id.strip():
        problems.add(name, line, "id", "expected a non-empty string")
        return None
    if len(doc_id) > MAX_ID_CHARS:
        problems.add(name, line, "id", f"expected at most {MAX_ID_CHARS} characters")
        return None
    title = rec.get("title", "")
    text = rec.get("text")
    if not isinstance(title, str):
        problems.add(name, line, "title", "expected a string")
        ok = False
    if not isinstance(text, str):
        problems.add(name, line, "text", "expected a string (the document body)")
        ok = False
    fields = rec.get("fields", {})
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        problems.add(name, line, "fields", "expected an object")
        ok = False
    sidecar = rec.get("sidecar", {})
    if sidecar is None:
        sidecar = {}
    if not isinstance(sidecar, dict):
        problems.add(name, line, "sidecar", "expected an object")
        ok = False
    else:
        ok = _validate_sidecar(sidecar, name, line, problems) and ok
    wire = rec.get("x402")
    if wire is not None:
        if not isinstance(wire, dict):
            problems.add(name, line, "x402", "expected an object or null")
            ok = False
        else:
            for field, message in owning("x402").record_problems(wire):
                problems.add(name, line, f"x402.{field}", message)
                ok = False
    if not ok or not isinstance(text, str):  # ok implies a str; the test narrows the type
        return None
    return Document(doc_id, title, text, fields, wire, sidecar)


class RecordError(ValueError):
    """A document record that :func:`validate_document` refuses; ``problems`` are every
    (field, message), the exception's text the first of them."""

    def __init__(self, problems: Sequence[tuple[str | None, str]]) -> None:
        field, message = problems[0]
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
        self.problems = list(problems)


def checked_document(record: Mapping[str, Any]) -> Document:
    """One record (a ``PUT /admin/resources/{id}`` body, an ``upsert`` argument) checked exactly
    as a corpus line is; raises :class:`RecordError`."""
    problems = Problems()
    doc = validate_document(record, "record", 1, problems)
    if doc is None or problems:
        raise RecordError([(p.field, p.message) for p in problems.items] or [(None, "invalid")])
    return doc


#: the settlements column is a PostgreSQL integer
MAX_SETTLEMENTS = 2**31 - 1


def _validate_sidecar(sidecar: Mapping[str, Any], name: str, line: int, problems: Problems) -> bool:
    """The sidecar keys the engine reads into typed columns and the ranking prior."""
    ok = True
    liveness = sidecar.get("liveness")
    if liveness is not None and not isinstance(liveness, str):
        problems.add(name, line, "sidecar.liveness", "expected a string or null")
        ok = False
    settlements = sidecar.get("settlements")
    if settlements is not None and (
        isinstance(settlements, bool)
        or not isinstance(settlements, int)
        or not 0 <= settlements <= MAX_SETTLEMENTS
    ):
        problems.add(
            name,
            line,
            "sidecar.settlements",
            f"expected an integer 0..{MAX_SETTLEMENTS} or null, got {settlements!r}",
        )
        ok = False
    return ok


def read_judgments_tsv(
    path: Path,
    problems: Problems,
    name: str,
    grades: list[int] | None,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
    """Native judgments TSV (header query_id, doc_id, grade). Returns judgments and the line of
    each pair (for later cross-checks)."""
    judgments: dict[str, dict[str, int]] = {}
    where: dict[tuple[str, str], int] = {}
    allowed = set(grades) if grades is not None else None
    scale = ", ".join(map(str, grades)) if grades is not None else ""
    header_seen = False
    for number, text in iter_lines(path, problems, name, max_line_bytes=max_line_bytes):
        if not text.strip():
            continue
        parts = text.split("\t")
        if not header_seen:
            header_seen = True
            if tuple(p.strip() for p in parts) != JUDGMENT_HEADER:
                problems.add(
                    name, number, None, "expected the header 'query_id<TAB>doc_id<TAB>grade'"
                )
            continue
        if len(parts) != 3:
            problems.add(name, number, None, f"expected 3 tab-separated fields, got {len(parts)}")
            continue
        qid, did, g = parts[0].strip(), parts[1].strip(), parts[2].strip()
        if not qid or not did:
            problems.add(name, number, "query_id" if not qid else "doc_id", "empty id")
            continue
        try:
            grade = int(g)
        except ValueError:
            problems.add(name, number, "grade", f"expected an integer grade, got {g!r}")
            continue
        if allowed is not None and grade not in allowed:
            problems.add(name, number, "grade", f"grade {grade} outside the declared scale {scale}")
            continue
        key = (qid, did)
        if key in where:
            problems.add(
                name, number, None, f"duplicate judgment {qid} {did} (first on line {where[key]})"
            )
            continue
        where[key] = number
        judgments.setdefault(qid, {})[did] = grade
    if not header_seen:
        problems.add(name, None, None, "empty file: expected the header and judgment rows")
    return judgments, where


def _check_choice(
    value: object,
    allowed: list[str] | None,
    key: str,
    what: str,
    name: str,
    line: int,
    problems: Problems,
) -> bool:
    """A query's class or split: a non-empty string, one of the manifest's when it lists them."""
    if not isinstance(value, str) or not value:
        problems.add(name, line, key, f"expected {what} (string)")
        return False
    if allowed is not None and value not in allowed:
        problems.add(
            name, line, key, f"unknown {key} {value!r}: expected one of {', '.join(allowed)}"
        )
        return False
    return True


def check_queries(
    items: list[tuple[dict[str, Any], int, dict[str, int]]],
    name: str,
    problems: Problems,
    *,
    splits: list[str] | None,
    classes: list[str] | None,
    assets: list[Asset],
    documents: Mapping[str, Document],
    seen_ids: set[str] | None = None,
    domain: Domain | None = None,
) -> dict[str, Query]:
    """Validate native query records (value, line, key lines); returns queries by id and adds
    every id seen (valid or not) to ``seen_ids``. Labelled hard constraints are judged by the
    collection's ``domain`` (by default the one owning the documents' records); a collection
    without one can label none."""
    if domain is None:
        name_of = named({}, documents.values())
        domain = None if name_of is None else get_domain(name_of)
    queries: dict[str, Query] = {}
    lines_of: dict[str, int] = {}
    for rec, line, key_lines in items:
        if not isinstance(rec, dict):
            problems.add(name, line, None, "expected a mapping with id, text, class, split")
            continue

        def at(key: str, _kl: dict[str, int] = key_lines, _line: int = line) -> int:
            return _kl.get(key, _line)

        ok = True
        for key in rec:
            if key not in QUERY_KEYS:
                problems.add(
                    name,
                    at(str(key)),
                    str(key),
                    f"unknown key: expected {', '.join(sorted(QUERY_KEYS))}",
                )
                ok = False
        qid = rec.get("id")
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        if not isinstance(qid, str) or not qid.strip():
            problems.add(name, at("id"), "id", "expected a non-empty string")
            continue
        if qid in lines_of:
            problems.add(
                name, at("id"), "id", f"duplicate query id {qid!r} (first on line {lines_of[qid]})"
            )
            continue
        lines_of[qid] = line
        text = rec.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.add(
                name, at("text"), "text", "query without text: expected a non-empty string"
            )
            ok = False
        qclass = rec.get("class")
        ok &= _check_choice(qclass, classes, "class", "a query class", name, at("class"), problems)
        split = rec.get("split")
        ok &= _check_choice(split, splits, "split", "a split", name, at("split"), problems)
        source, group = rec.get("source"), rec.get("group")
        if isinstance(source, int) and not isinstance(source, bool):
            source = str(source)  # ids may be YAML integers; they are compared as strings
        if source is not None and not isinstance(source, str):
            problems.add(name, at("source"), "source", "expected a query id or null")
            ok = False
        if group is not None and not isinstance(group, (str, int)):
            problems.add(name, at("group"), "group", "expected a group id or null")
            ok = False
        constraints = rec.get("constraints") or {}
        if not isinstance(constraints, dict):
            problems.add(name, at("constraints"), "constraints", "expected a mapping of filters")
            ok = False
            constraints = {}
        if constraints and domain is None:
            problems.add(
                name,
                at("constraints"),
                "constraints",
                "hard constraints need a domain that judges them: declare 'domain' in "
                f"collection.yaml (one of {', '.join(known())})",
            )
            ok = False
        elif constraints and domain is not None:
            for key, message in domain.filter_problems(constraints, assets):
                problems.add(name, at("constraints"), f"constraints.{key}", message)
                ok = False
        expect = rec.get("expect") or {}
        if not isinstance(expect, dict):
            problems.add(name, at("expect"), "expect", "expected a mapping")
            ok = False
            expect = {}
        ok = _check_expect(expect, name, at("expect"), problems, documents) and ok
        # ok implies three strings (checked above); the tests narrow the types
        if ok and isinstance(text, str) and isinstance(qclass, str) and isinstance(split, str):
            queries[qid] = Query(
                id=qid,
                text=text,
                query_class=qclass,
                split=split,
                source=source if isinstance(source, str) else None,
                group=None if group is None else str(group),
                constraints=(
                    domain.normalize_filters(constraints) if domain and constraints else {}
                ),
                expect=dict(expect),
            )
    # Cross-query checks run on the records that passed; a bad source is reported at its line.
    for rec, line, key_lines in items:
        if not isinstance(rec, dict):
            continue
        qid, source = rec.get("id"), rec.get("source")
        if isinstance(source, int) and not isinstance(source, bool):
            source = str(source)
        if not isinstance(source, str) or str(qid) not in queries:
            continue
        sline = key_lines.get("source", line)
        if source == str(qid):
            problems.add(name, sline, "source", "a query cannot be its own source")
        elif source not in lines_of:
            problems.add(name, sline, "source", f"unknown source query {source!r}")
        elif source in queries and queries[source].split != queries[str(qid)].split:
            problems.add(
                name,
                sline,
                "split",
                f"typo query {qid} is in split {queries[str(qid)].split!r} but its source "
                f"{source} is in {queries[source].split!r}: expected the same split",
            )
    if seen_ids is not None:
        seen_ids.update(lines_of)
    return queries


def _check_expect(
    expect: Mapping[str, Any],
    name: str,
    line: int,
    problems: Problems,
    documents: Mapping[str, Document],
) -> bool:
    ok = True
    for key, value in expect.items():
        f = f"expect.{key}"
        if key not in EXPECT_KEYS:
            problems.add(
                name, line, f, f"unknown expectation: expected one of {', '.join(EXPECT_KEYS)}"
            )
            ok = False
        elif key == "known_item":
            if not isinstance(value, str) or value not in documents:
                problems.add(name, line, f, f"expected the id of a corpus document, got {value!r}")
                ok = False
        elif key == "max_rank":
            if type(value) is not int or value < 1:
                problems.add(name, line, f, f"expected a positive integer, got {value!r}")
                ok = False
        elif key == "must_include":
            if not isinstance(value, list) or not value:
                problems.add(name, line, f, "expected a non-empty list of document ids")
                ok = False
            else:
                for d in value:
                    if not isinstance(d, str) or d not in documents:
                        problems.add(name, line, f, f"unknown document {d!r}")
                        ok = False
        elif key == "no_result" and not isinstance(value, bool):
            problems.add(name, line, f, f"expected true or false, got {value!r}")
            ok = False
    if expect.get("no_result") is True and ("known_item" in expect or "must_include" in expect):
        problems.add(
            name, line, "expect.no_result", "no_result contradicts known_item/must_include"
        )
        ok = False
    if "max_rank" in expect and "known_item" not in expect and "must_include" not in expect:
        problems.add(name, line, "expect.max_rank", "max_rank needs known_item or must_include")
        ok = False
    return ok


def read_corpus_files(
    files: list[Path],
    root: Path,
    problems: Problems,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[dict[str, Document], set[str]]:
    """Read native JSONL corpus files; returns the valid documents and every id seen (also of
    invalid records, so that judgments naming them are not reported a second time)."""
    documents: dict[str, Document] = {}
    seen: set[str] = set()
    where: dict[str, str] = {}
    for path in files:
        name = display(path, root)
        for line, rec in iter_jsonl(path, problems, name, max_line_bytes=max_line_bytes):
            rid = rec.get("id")
            if isinstance(rid, str):
                seen.add(rid)
            doc = validate_document(rec, name, line, problems)
            if doc is None:
                continue
            if doc.id in where:
                problems.add(
                    name, line, "id", f"duplicate document id {doc.id!r} (first at {where[doc.id]})"
                )
                continue
            where[doc.id] = f"{name}:{line}"
            documents[doc.id] = doc
    return documents, seen


def read_queries_yaml(
    path: Path, root: Path, problems: Problems
) -> list[tuple[dict[str, Any], int, dict[str, int]]]:
    name = display(path, root)
    node = read_yaml(path, problems, name)
    return [(i.value, i.line, i.key_lines) for i in yaml_items(node, problems, name, "queries")]


def read_provenance(path: Path, root: Path, problems: Problems) -> dict[str, Any]:
    name = display(path, root)
    node = read_yaml(path, problems, name)
    if node is None:
        return {}
    value = construct(node, problems, name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(name, 1, None, "expected a YAML mapping")
        return {}
    return value
