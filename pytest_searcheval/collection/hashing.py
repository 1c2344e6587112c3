"""Content hashes of a collection: ``sha256:<hex>`` over a canonical form (one JSON line per record,
keys sorted, records sorted by id), so formatting and order do not change a hash while any change of
content does."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_searcheval.collection.model import (
    BeirDocuments,
    Document,
    Query,
)

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
    ordered = (
        documents.in_order(sorted(documents))
        if isinstance(documents, BeirDocuments)
        else (documents[k] for k in sorted(documents))
    )
    return _digest_records([d.id, d.title, d.text, d.fields, d.x402, d.sidecar] for d in ordered)


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
