"""Load a collection: native, BEIR or TREC, validated (every problem with file, line, field) and
hashed; nothing is loaded partially."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Collection as Collection_
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_searcheval.collection.hashing import content_hashes
from pytest_searcheval.collection.io import (
    DEFAULT_MAX_LINE_BYTES,
    Problems,
    display,
    iter_jsonl,
)
from pytest_searcheval.collection.model import (
    Asset,
    Collection,
    CollectionError,
    Document,
    Problem,
    Query,
)
from pytest_searcheval.collection.native import (
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
from pytest_searcheval.collection.trec import (
    read_beir_corpus,
    read_beir_qrels,
    read_beir_queries,
    read_trec_corpus,
    read_trec_qrels,
    read_trec_run,
    read_trec_topics,
)
from pytest_searcheval.domain import Domain, named
from pytest_searcheval.domain import get as get_domain

GENERIC_CLASS = "generic"


UNJUDGED_SPLIT = "unjudged"


BEIR_SPLITS = ("train", "dev", "test")


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


def layout(root: Path) -> str | None:
    """``"native"``, ``"beir"`` or None: how :func:`load` reads the directory ``root``."""
    if (
        (root / "collection.yaml").exists()
        or (root / "corpus").is_dir()
        or (root / "qrels" / "queries.yaml").exists()
    ):
        return "native"
    if (root / "corpus.jsonl").exists() and (root / "queries.jsonl").exists():
        return "beir"
    return None


def load(
    path: str | Path,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    grades: Sequence[int] | None = None,
) -> Collection:
    """Load a native or BEIR collection directory (detected from its files).

    Native: a ``collection.yaml``, a ``corpus/`` directory or ``qrels/queries.yaml``.
    BEIR: ``corpus.jsonl`` and ``queries.jsonl``. TREC files are loaded with ``load_trec``.
    ``grades`` declares a BEIR collection's scale (else the grades its qrels hold); a native
    collection declares its own in collection.yaml, and a different one here is refused.
    """
    root = Path(path)
    if not root.is_dir():
        if root.exists():
            msg = "expected a collection directory (use load_trec for TREC files)"
        else:
            msg = "no such directory"
        raise CollectionError([Problem(str(root), None, None, msg)])
    kind = layout(root)
    if kind == "native":
        native = load_native(root, max_line_bytes=max_line_bytes)
        if grades is not None and sorted(set(grades)) != native.grades:
            raise CollectionError(
                [
                    Problem(
                        str(root / "collection.yaml"),
                        None,
                        "grades",
                        f"the declared grade scale {sorted(set(grades))} differs from the "
                        f"collection's {native.grades}: a native collection declares its scale "
                        "in collection.yaml (grades)",
                    )
                ]
            )
        return native
    if kind == "beir":
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


def _domain(manifest: Mapping[str, Any], documents: Mapping[str, Document]) -> Domain | None:
    """The collection's domain (declared, else owning its documents' records), which judges the
    queries' labelled constraints."""
    name = named(manifest, documents.values())
    return None if name is None else get_domain(name)


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
            domain=_domain(manifest, documents),
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
    documents = read_beir_corpus(
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
    documents.keep(d for docs in judgments.values() for d in docs)
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
        "grades": sorted(set(grades)) if grades is not None else all_grades,
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
        "grades": sorted(set(grades))
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
