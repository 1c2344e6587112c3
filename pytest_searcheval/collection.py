"""Test collections: load, validate and hash corpus, queries and graded judgments.

Three input shapes load into one ``Collection``:

* native: ``collection.yaml``, ``corpus/*.jsonl``, ``qrels/queries.yaml``, ``qrels/judgments.tsv``,
  ``qrels/provenance.yaml`` (docs/formats.md);
* BEIR: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/{train,dev,test}.tsv``;
* TREC: qrels (``qid 0 docid grade``), topics (SGML or ``qid<TAB>text``), optional corpus.

Validation collects every problem (file, line, field, what was expected) and raises
``CollectionError`` listing them; nothing is loaded partially.

Content hashes are ``sha256:<hex>`` over a canonical form: one JSON line per record (keys
sorted, no insignificant whitespace, UTF-8), records sorted by id, so file order, key order and
formatting do not change the hash while any change of content does.

Command line: ``python -m pytest_searcheval.collection {check,agree,export,overrides} ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import json
import sys
from collections.abc import Collection as Collection_
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_searcheval import constraints as _constraints
from pytest_searcheval.collection_agree import (
    Disagreement,
    MergeResult,
    merge_judgments,
    read_adjudication,
    write_adjudication,
    write_judgments_tsv,
)
from pytest_searcheval.collection_io import (
    DEFAULT_MAX_LINE_BYTES,
    Problems,
    display,
    iter_jsonl,
    read_yaml,
    yaml_items,
)
from pytest_searcheval.collection_model import (
    Asset,
    Collection,
    CollectionError,
    Document,
    Problem,
    Query,
)
from pytest_searcheval.collection_native import (
    DEFAULT_GRADES,
    DEFAULT_SPLITS,
    check_queries,
    read_corpus_files,
    read_judgments_tsv,
    read_manifest,
    read_provenance,
    read_queries_yaml,
    validate_document,
)
from pytest_searcheval.collection_trec import (
    read_beir_corpus,
    read_beir_qrels,
    read_beir_queries,
    read_trec_corpus,
    read_trec_qrels,
    read_trec_run,
    read_trec_topics,
    write_trec_qrels,
    write_trec_run,
)

__all__ = [
    "Asset",
    "Collection",
    "CollectionError",
    "ConformanceCase",
    "ConformanceSet",
    "Disagreement",
    "Document",
    "MergeResult",
    "Override",
    "Problem",
    "Query",
    "apply_constraint_overrides",
    "content_hashes",
    "load",
    "load_beir",
    "load_conformance",
    "load_native",
    "load_trec",
    "main",
    "merge_judgments",
    "read_judgments",
    "read_run",
    "schema",
    "write_trec_qrels",
    "write_trec_run",
]

GENERIC_CLASS = "generic"
UNJUDGED_SPLIT = "unjudged"
BEIR_SPLITS = ("train", "dev", "test")


# --------------------------------------------------------------------------------- hashing


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_CHUNK = 2048


def _canon(value: Any) -> str:
    return _ENCODER.encode(value)


def _digest_records(records: Iterator[list[Any]]) -> str:
    """sha256 over canonical JSON of the records, encoded a chunk at a time: one C-level
    encoder call per chunk instead of one Python call per record."""
    h = hashlib.sha256()
    chunk: list[list[Any]] = []
    for rec in records:
        chunk.append(rec)
        if len(chunk) == _CHUNK:
            h.update(_canon(chunk).encode("utf-8"))
            chunk = []
    if chunk:
        h.update(_canon(chunk).encode("utf-8"))
    return "sha256:" + h.hexdigest()


def hash_documents(documents: Mapping[str, Document]) -> str:
    """Hash of the corpus: every field of every document, documents in id order."""
    return _digest_records(
        [d.id, d.title, d.text, d.fields, d.x402, d.sidecar]
        for d in (documents[k] for k in sorted(documents))
    )


def hash_queries(queries: Mapping[str, Query]) -> str:
    """Hash of the queries: id, text, class, split, source, group, constraints, expectations."""
    return _digest_records(
        [q.id, q.text, q.query_class, q.split, q.source, q.group, q.constraints, q.expect]
        for q in (queries[k] for k in sorted(queries))
    )


def hash_judgments(judgments: Mapping[str, Mapping[str, int]]) -> str:
    """Hash of the judgments: ``qid<TAB>docid<TAB>grade`` lines in (qid, docid) order."""
    h = hashlib.sha256()
    for q in sorted(judgments):
        docs = judgments[q]
        h.update("".join(f"{q}\t{d}\t{int(docs[d])}\n" for d in sorted(docs)).encode("utf-8"))
    return "sha256:" + h.hexdigest()


def content_hashes(
    documents: Mapping[str, Document],
    queries: Mapping[str, Query],
    judgments: Mapping[str, Mapping[str, int]],
) -> dict[str, str]:
    return {
        "corpus": hash_documents(documents),
        "queries": hash_queries(queries),
        "judgments": hash_judgments(judgments),
    }


# --------------------------------------------------------------------------------- loading


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small containers.

    Loading allocates millions of dicts and lists that are never garbage; with the collector on,
    each full collection rescans the growing heap, which measured as most of the load time of a
    100k-document corpus (see benchmarks/bench_collection.py).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load(
    path: str | Path,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    grades: Sequence[int] | None = None,
) -> Collection:
    """Load a native or BEIR collection directory (detected from its files).

    Native: a ``collection.yaml``, a ``corpus/`` directory or ``qrels/queries.yaml``.
    BEIR: ``corpus.jsonl`` and ``queries.jsonl``. TREC files are loaded with ``load_trec``.
    """
    root = Path(path)
    if not root.is_dir():
        if root.exists():
            msg = "expected a collection directory (use load_trec for TREC files)"
        else:
            msg = "no such directory"
        raise CollectionError([Problem(str(root), None, None, msg)])
    if (
        (root / "collection.yaml").exists()
        or (root / "corpus").is_dir()
        or (root / "qrels" / "queries.yaml").exists()
    ):
        return load_native(root, max_line_bytes=max_line_bytes)
    if (root / "corpus.jsonl").exists() and (root / "queries.jsonl").exists():
        return load_beir(root, max_line_bytes=max_line_bytes, grades=grades)
    raise CollectionError(
        [
            Problem(
                str(root),
                None,
                None,
                "not a collection: expected collection.yaml + corpus/*.jsonl + qrels/ (native) "
                "or corpus.jsonl + queries.jsonl + qrels/*.tsv (BEIR)",
            )
        ]
    )


def load_native(root: str | Path, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Collection:
    """Load and validate the native layout (see the module docstring and docs/formats.md)."""
    with _gc_paused():
        return _load_native(Path(root), max_line_bytes)


def _load_native(root: Path, max_line_bytes: int) -> Collection:
    root = Path(root)
    problems = Problems()
    manifest: dict[str, Any] = {}
    assets: list[Asset] = []
    if (root / "collection.yaml").exists():
        manifest, assets = read_manifest(root / "collection.yaml", problems, root)
    manifest.setdefault("grades", list(DEFAULT_GRADES))
    manifest.setdefault("splits", list(DEFAULT_SPLITS))
    grades: list[int] = manifest["grades"]

    corpus_dir = root / "corpus"
    files = sorted(corpus_dir.glob("*.jsonl")) if corpus_dir.is_dir() else []
    if not files:
        problems.add("corpus/", None, None, "empty corpus: expected corpus/*.jsonl files")
    documents, doc_ids = read_corpus_files(files, root, problems, max_line_bytes=max_line_bytes)
    if files and not documents and not problems:
        problems.add("corpus/", None, None, "empty corpus: the JSONL files hold no documents")

    qpath = root / "qrels" / "queries.yaml"
    qname = display(qpath, root)
    queries: dict[str, Query] = {}
    query_ids: set[str] | None = set()
    if not qpath.exists():
        problems.add(qname, None, None, "missing: expected the list of queries")
    else:
        items = read_queries_yaml(qpath, root, problems)
        queries = check_queries(
            items,
            qname,
            problems,
            splits=manifest.get("splits"),
            classes=manifest.get("classes"),
            assets=assets,
            documents=documents,
            seen_ids=query_ids,
        )
        if not items:
            if qname in {p.file for p in problems.items}:
                query_ids = None  # unreadable: do not also call every judged query unknown
            else:
                problems.add(qname, None, None, "no queries: expected a non-empty YAML list")

    jpath = root / "qrels" / "judgments.tsv"
    jname = display(jpath, root)
    judgments: dict[str, dict[str, int]] = {}
    if jpath.exists():
        judgments, where = read_judgments_tsv(
            jpath, problems, jname, grades, max_line_bytes=max_line_bytes
        )
        _check_judgment_ids(where, jname, problems, query_ids, doc_ids)
    else:
        problems.add(jname, None, None, "missing: expected the graded judgments TSV")
    _check_no_result(queries, judgments, qname, problems)

    provenance: dict[str, Any] = {}
    ppath = root / "qrels" / "provenance.yaml"
    if ppath.exists():
        provenance = read_provenance(ppath, root, problems)

    problems.raise_if_any()
    manifest.setdefault("format", "native")
    if "classes" not in manifest:
        manifest["classes"] = sorted({q.query_class for q in queries.values()})
    return Collection(
        documents=documents,
        queries=queries,
        judgments=judgments,
        assets=assets,
        hashes=content_hashes(documents, queries, judgments),
        provenance=provenance,
        manifest=manifest,
        root=str(root),
    )


def _check_judgment_ids(
    where: Mapping[tuple[str, str], int],
    name: str,
    problems: Problems,
    query_ids: Collection_[str] | None,
    doc_ids: Collection_[str] | None,
) -> None:
    """Judgments must name known queries and documents. ``None`` skips a check (no corpus given,
    or the queries file could not be read at all and is reported already)."""
    for (q, d), line in sorted(where.items(), key=lambda kv: kv[1]):
        if query_ids is not None and q not in query_ids:
            problems.add(name, line, "query_id", f"unknown query {q!r}: not in the queries")
        if doc_ids is not None and d not in doc_ids:
            problems.add(name, line, "doc_id", f"unknown document {d!r}: not in the corpus")


def _check_no_result(
    queries: Mapping[str, Query],
    judgments: Mapping[str, Mapping[str, int]],
    name: str,
    problems: Problems,
) -> None:
    # A no-result query asserts that the catalog cannot serve the need. A tangential listing
    # (grade 1: related topic, different need) is consistent with that; grade 2 or 3 (same need)
    # contradicts it.
    for q in queries.values():
        if q.expect.get("no_result") is True:
            relevant = sorted(d for d, g in judgments.get(q.id, {}).items() if g >= 2)
            if relevant:
                problems.add(
                    name,
                    None,
                    f"{q.id}.expect.no_result",
                    f"query {q.id} expects no result but {len(relevant)} documents are judged "
                    f"on topic (e.g. {relevant[0]}): expected grades 0 or 1 only",
                )


def load_beir(
    root: str | Path,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    grades: Sequence[int] | None = None,
) -> Collection:
    """Load a BEIR directory. A query's split is the qrels file that judges it (train, dev,
    test); queries judged in no file get split "unjudged"; a query judged in two split files
    is a problem. The class is ``metadata.class`` when present, else "generic"."""
    with _gc_paused():
        return _load_beir(Path(root), max_line_bytes, grades)


def _load_beir(root: Path, max_line_bytes: int, grades: Sequence[int] | None) -> Collection:
    problems = Problems()
    documents, _ = read_beir_corpus(
        root / "corpus.jsonl", "corpus.jsonl", problems, max_line_bytes=max_line_bytes
    )
    if not documents and not problems:
        problems.add("corpus.jsonl", None, None, "empty corpus: expected at least one document")
    raw_queries = read_beir_queries(
        root / "queries.jsonl", "queries.jsonl", problems, max_line_bytes=max_line_bytes
    )
    judgments: dict[str, dict[str, int]] = {}
    split_of: dict[str, str] = {}
    found: list[str] = []
    for split in BEIR_SPLITS:
        path = root / "qrels" / f"{split}.tsv"
        if not path.exists():
            continue
        found.append(split)
        name = f"qrels/{split}.tsv"
        part, where = read_beir_qrels(path, name, problems, grades, max_line_bytes=max_line_bytes)
        _check_judgment_ids(where, name, problems, raw_queries, documents)
        for q, docs in part.items():
            if q in split_of:
                problems.add(
                    name,
                    None,
                    "query-id",
                    f"query {q!r} is judged in both {split_of[q]} and {split}",
                )
                continue
            split_of[q] = split
            judgments[q] = dict(docs)
    if not found:
        problems.add(
            "qrels/", None, None, "expected qrels/train.tsv, qrels/dev.tsv or qrels/test.tsv"
        )
    problems.raise_if_any()
    queries = {
        q: Query(
            id=q,
            text=text,
            query_class=str(meta.get("class", GENERIC_CLASS)),
            split=split_of.get(q, UNJUDGED_SPLIT),
        )
        for q, (text, meta, _) in raw_queries.items()
    }
    splits = [s for s in BEIR_SPLITS if s in found]
    if any(q.split == UNJUDGED_SPLIT for q in queries.values()):
        splits.append(UNJUDGED_SPLIT)
    all_grades = sorted({g for docs in judgments.values() for g in docs.values()})
    manifest = {
        "name": root.name,
        "format": "beir",
        "grades": list(grades) if grades is not None else all_grades,
        "splits": splits,
        "classes": sorted({q.query_class for q in queries.values()}),
    }
    return Collection(
        documents=documents,
        queries=queries,
        judgments=judgments,
        hashes=content_hashes(documents, queries, judgments),
        manifest=manifest,
        root=str(root),
    )


def load_trec(
    *,
    qrels: str | Path,
    topics: str | Path,
    corpus: str | Path | None = None,
    split: str = "test",
    topic_field: str = "title",
    grades: Sequence[int] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Collection:
    """Load TREC qrels + topics (+ optional corpus: ``.jsonl`` native/BEIR records or an SGML
    ``<DOC>`` file). Without a corpus, documents is empty and judged document ids are not
    checked. Every topic gets ``split``; negative TREC grades are kept (judged non-relevant)."""
    with _gc_paused():
        return _load_trec(
            Path(qrels), Path(topics), corpus, split, topic_field, grades, max_line_bytes
        )


def _load_trec(
    qpath: Path,
    tpath: Path,
    corpus: str | Path | None,
    split: str,
    topic_field: str,
    grades: Sequence[int] | None,
    max_line_bytes: int,
) -> Collection:
    problems = Problems()
    judgments, where = read_trec_qrels(
        qpath, str(qpath), problems, grades, max_line_bytes=max_line_bytes
    )
    tops = read_trec_topics(
        tpath, str(tpath), problems, field=topic_field, max_line_bytes=max_line_bytes
    )
    documents: dict[str, Document] | None = None
    if corpus is not None:
        cpath = Path(corpus)
        if cpath.suffix == ".jsonl":
            documents = _read_any_jsonl_corpus(cpath, problems, max_line_bytes)
        else:
            documents, _ = read_trec_corpus(
                cpath, str(cpath), problems, max_line_bytes=max_line_bytes
            )
        if not documents and not problems:
            problems.add(str(cpath), None, None, "empty corpus: expected at least one document")
    _check_judgment_ids(where, str(qpath), problems, tops, documents)
    problems.raise_if_any()
    queries = {
        q: Query(id=q, text=text, query_class=GENERIC_CLASS, split=split)
        for q, (text, _) in tops.items()
    }
    docs = documents or {}
    manifest = {
        "name": qpath.stem,
        "format": "trec",
        "grades": list(grades)
        if grades is not None
        else sorted({g for d in judgments.values() for g in d.values()}),
        "splits": [split],
        "classes": [GENERIC_CLASS],
        "corpus": None if corpus is None else str(corpus),
    }
    return Collection(
        documents=docs,
        queries=queries,
        judgments=judgments,
        hashes=content_hashes(docs, queries, judgments),
        manifest=manifest,
    )


def _read_any_jsonl_corpus(
    path: Path, problems: Problems, max_line_bytes: int
) -> dict[str, Document]:
    docs: dict[str, Document] = {}
    first: dict[str, int] = {}
    name = str(path)
    for line, rec in iter_jsonl(path, problems, name, max_line_bytes=max_line_bytes):
        if "_id" in rec:
            rec = {
                "id": str(rec["_id"]),
                "title": rec.get("title") or "",
                "text": rec.get("text"),
                "fields": rec.get("metadata") or {},
            }
        doc = validate_document(rec, name, line, problems)
        if doc is None:
            continue
        if doc.id in first:
            problems.add(
                name,
                line,
                "id",
                f"duplicate document id {doc.id!r} (first on line {first[doc.id]})",
            )
            continue
        first[doc.id] = line
        docs[doc.id] = doc
    return docs


def read_run(
    path: str | Path, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> dict[str, dict[str, float]]:
    """Read a TREC run file ``qid Q0 docid rank score tag`` -> {qid: {docid: score}}."""
    problems = Problems()
    p = Path(path)
    run = read_trec_run(p, str(p), problems, max_line_bytes=max_line_bytes)
    problems.raise_if_any()
    return run


def read_judgments(
    path: str | Path, grades: Sequence[int] | None = DEFAULT_GRADES
) -> dict[str, dict[str, int]]:
    """Read a native judgments TSV (``query_id<TAB>doc_id<TAB>grade`` with header)."""
    problems = Problems()
    p = Path(path)
    judgments, _ = read_judgments_tsv(p, problems, str(p), list(grades) if grades else None)
    problems.raise_if_any()
    return judgments


# ------------------------------------------------------------------------ constraint override


@dataclass(frozen=True, slots=True)
class Override:
    """A judged pair forced to grade 0 because the listing breaks the query's constraints."""

    query_id: str
    doc_id: str
    original_grade: int
    reasons: tuple[str, ...]


def apply_constraint_overrides(
    collection: Collection,
) -> tuple[dict[str, dict[str, int]], list[Override]]:
    """New judgments where every judged pair whose listing violates the query's labelled hard
    constraints (per the independent oracle, ``constraints.violations``) has grade 0, and the
    list of pairs changed (grade > 0 before). The collection itself is not modified."""
    new = {q: dict(docs) for q, docs in collection.judgments.items()}
    overrides: list[Override] = []
    for qid in sorted(new):
        query = collection.queries.get(qid)
        if query is None or not query.constraints:
            continue
        for did in sorted(new[qid]):
            grade = new[qid][did]
            doc = collection.documents.get(did)
            if grade <= 0 or doc is None:
                continue
            reasons = _constraints.violations(doc, query.constraints, collection.assets)
            if reasons:
                new[qid][did] = 0
                overrides.append(Override(qid, did, grade, tuple(reasons)))
    return new, overrides


# ------------------------------------------------------------------------ conformance set


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


# ------------------------------------------------------------------------ JSON Schemas

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


# ------------------------------------------------------------------------ command line


def _agree(args: argparse.Namespace) -> int:
    problems = Problems()
    grades = [int(g) for g in args.grades.split(",")]
    a, _ = read_judgments_tsv(Path(args.a), problems, args.a, grades)
    b, _ = read_judgments_tsv(Path(args.b), problems, args.b, grades)
    adjudication = {}
    adj_path = Path(args.adjudicate) if args.adjudicate else None
    if adj_path is not None and adj_path.exists():
        adjudication = read_adjudication(adj_path, problems, args.adjudicate, grades)
    problems.raise_if_any()
    result = merge_judgments(a, b, adjudication, grades=grades)
    s = result.agreement
    print(f"pairs:            {s.n}")
    print(f"exact agreement:  {s.exact:.4f}")
    print(f"within one grade: {s.within_one:.4f}")
    print(f"quadratic kappa:  {s.qwk:.4f}")
    print(f"severe (>=2 apart): {s.severe} ({s.severe_rate:.4f})")
    print(f"one apart, merged to the lower grade: {result.one_apart}")
    print(f"adjudicated: {result.adjudicated}; pending adjudication: {len(result.pending)}")
    for p in result.pending[:20]:
        print(f"  pending {p.query_id} {p.doc_id}: A={p.grade_a} B={p.grade_b}")
    if adj_path is not None and result.pending:
        _atomic_write(adj_path, lambda fh: write_adjudication(result.pending, fh, adjudication))
        print(f"wrote {adj_path}: fill the grade column of {len(result.pending)} rows and rerun")
    if result.pending:
        if args.out:
            print(f"not writing {args.out}: {len(result.pending)} pairs await adjudication")
        return 3
    if args.out:
        _atomic_write(Path(args.out), lambda fh: write_judgments_tsv(result.merged, fh))
        print(f"wrote {args.out}")
    return 0


def _atomic_write(path: Path, write: Any) -> None:
    import os

    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="\n") as fh:
        write(fh)
    os.replace(tmp, path)


def _check(args: argparse.Namespace) -> int:
    c = load(args.path)
    print(
        f"{c.manifest.get('name', args.path)} ({c.manifest.get('format')}): "
        f"{len(c.documents)} documents, {len(c.queries)} queries, "
        f"{sum(len(v) for v in c.judgments.values())} judgments"
    )
    for split in c.manifest.get("splits", []):
        print(f"  split {split}: {len(c.queries_in(split))} queries")
    for key, value in c.hashes.items():
        print(f"  {key}: {value}")
    conf = Path(args.path) / "conformance"
    if conf.is_dir():
        cs = load_conformance(conf, c.assets)
        print(f"  conformance: {len(cs.documents)} listings, {len(cs.cases)} cases, oracle agrees")
    _, overrides = apply_constraint_overrides(c)
    print(f"  constraint overrides pending: {len(overrides)}")
    for o in overrides[:20]:
        print(f"    {o.query_id} {o.doc_id} grade {o.original_grade} -> 0: {o.reasons[0]}")
    return 1 if overrides else 0


def _export(args: argparse.Namespace) -> int:
    c = load(args.path)
    qrels = c.qrels(args.split)
    _atomic_write(Path(args.out), lambda fh: write_trec_qrels(qrels, fh))
    print(f"wrote {args.out}: {sum(len(v) for v in qrels.values())} judgments")
    return 0


def _overrides(args: argparse.Namespace) -> int:
    c = load(args.path)
    new, overrides = apply_constraint_overrides(c)
    print(json.dumps([asdict(o) for o in overrides], indent=1))
    if args.write and overrides:
        assert c.root is not None
        _atomic_write(
            Path(c.root) / "qrels" / "judgments.tsv", lambda fh: write_judgments_tsv(new, fh)
        )
        print(f"rewrote qrels/judgments.tsv: {len(overrides)} grades forced to 0", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_searcheval.collection")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("agree", help="judge agreement of two judgment TSVs and their merge")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--out", help="write the merged judgments TSV (only when nothing is pending)")
    p.add_argument("--adjudicate", help="adjudication TSV: read resolutions, write pending rows")
    p.add_argument("--grades", default="0,1,2,3", help="grade scale (default 0,1,2,3)")
    p.set_defaults(func=_agree)
    p = sub.add_parser("check", help="validate a collection directory and print its hashes")
    p.add_argument("path")
    p.set_defaults(func=_check)
    p = sub.add_parser("export", help="export judgments as TREC qrels")
    p.add_argument("path")
    p.add_argument("--out", required=True)
    p.add_argument("--split", default="all")
    p.set_defaults(func=_export)
    p = sub.add_parser("overrides", help="list judged pairs that break their query's constraints")
    p.add_argument("path")
    p.add_argument(
        "--write", action="store_true", help="rewrite qrels/judgments.tsv with them at 0"
    )
    p.set_defaults(func=_overrides)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CollectionError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
