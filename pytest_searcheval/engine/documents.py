"""Documents as the engine stores them: records in, the texts each model reads, rows out.

The rows of one document go to ``documents``, ``payment_options`` (x402 options), ``extensions``,
``terms`` and ``doc_lengths`` (the analyzer's postings, engine/index.py) and ``embeddings``;
``field_stats`` is recomputed from ``doc_lengths`` after every write.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from pytest_searcheval.collection.model import Asset, Document
from pytest_searcheval.collection.native import checked_document
from pytest_searcheval.engine import index, x402

if TYPE_CHECKING:
    import psycopg

#: the engine's data tables (engine/migrations), in foreign-key order for copying
INDEX_TABLES: tuple[str, ...] = (
    "documents",
    "payment_options",
    "extensions",
    "terms",
    "doc_lengths",
    "field_stats",
    "embeddings",
)


def document_from_record(record: Mapping[str, Any] | Document) -> Document:
    """A :class:`Document` from a JSON record (``PUT /admin/resources/{id}`` body) or as is."""
    if isinstance(record, Document):
        return record
    return checked_document(record)  # the corpus loader's check: RecordError names the field


def embedding_text(doc: Document) -> str:
    """What the bi-encoder sees: title, description, tags/provider, MCP tool name."""
    texts = index.field_texts(doc.title, doc.text, doc.fields, doc.x402)
    parts = [texts["title"], texts["text"], texts["meta"], texts["tool"]]
    return "\n".join(p for p in parts if p.strip())


def rerank_text(doc: Document) -> str:
    """What the cross-encoder of ``hybrid_rerank`` reads beside the query."""
    return f"{doc.title}. {doc.text}"


def resource_body(doc: Document) -> dict[str, Any]:
    """The ``resource`` of a search result: the x402 listing, or the title of a generic one."""
    if doc.x402 is not None:
        return dict(doc.x402)
    return {"title": doc.title}


def extension_names(doc: Document) -> list[str]:
    ext = (doc.x402 or {}).get("extensions")
    return sorted(str(k) for k in ext) if isinstance(ext, Mapping) else []


def _copy_value(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def postings_of(d: Document) -> dict[str, Counter[str]]:
    """``{field: term frequencies}`` of one listing: the rows ``write_rows`` writes to ``terms``."""
    return index.field_terms(index.field_texts(d.title, d.text, d.fields, d.x402))


def write_rows(
    conn: psycopg.Connection[Any],
    docs: Sequence[Document],
    vectors: Sequence[Any],
    *,
    assets: Sequence[Asset],
    model_id: str,
    postings: list[tuple[str, dict[str, Counter[str]]]] | None = None,
) -> None:
    """COPY every row of ``docs`` (and their ``vectors``, None where encoding failed).
    ``postings`` receives each document's ``(id, {field: term frequencies})`` as written."""
    if not docs:
        return
    with conn.cursor() as cur:
        with cur.copy(
            "COPY documents (id, title, body, fields, x402, sidecar, doc_type, liveness,"
            " settlements) FROM STDIN"
        ) as cp:
            for d in docs:
                settlements = d.sidecar.get("settlements")
                cp.write_row(
                    (
                        d.id,
                        d.title,
                        d.text,
                        json.dumps(d.fields),
                        None if d.x402 is None else json.dumps(d.x402),
                        json.dumps(d.sidecar),
                        (d.x402 or {}).get("type") if d.x402 is not None else None,
                        d.sidecar.get("liveness"),
                        settlements if isinstance(settlements, int) else None,
                    )
                )
        option_rows = [list(x402.option_rows(d, assets)) for d in docs if d.x402 is not None]
        columns = next((list(rows[0].keys()) for rows in option_rows if rows), None)
        if columns is not None:
            stmt = sql.SQL("COPY payment_options ({}) FROM STDIN").format(
                sql.SQL(", ").join(sql.Identifier(c) for c in columns)
            )
            with cur.copy(stmt) as cp:
                for opts in option_rows:
                    for opt in opts:
                        cp.write_row(tuple(_copy_value(opt.get(c)) for c in columns))
        with cur.copy("COPY extensions (doc_id, name) FROM STDIN") as cp:
            for d in docs:
                for name in extension_names(d):
                    cp.write_row((d.id, name))
        lengths: list[tuple[str, str, int]] = []
        with cur.copy("COPY terms (doc_id, field, term, tf) FROM STDIN") as cp:
            for d in docs:
                per_field = postings_of(d)
                if postings is not None:
                    postings.append((d.id, per_field))
                for fname, counts in per_field.items():
                    lengths.append((d.id, fname, sum(counts.values())))
                    for term, tf in counts.items():
                        cp.write_row((d.id, fname, term, tf))
        with cur.copy("COPY doc_lengths (doc_id, field, len) FROM STDIN") as cp:
            for row in lengths:
                cp.write_row(row)
        # Binary COPY: each float32 goes in as its four bytes (exact; nothing to format).
        with cur.copy(
            "COPY embeddings (doc_id, model, embedding) FROM STDIN (FORMAT BINARY)"
        ) as cp:
            cp.set_types(["text", "text", "vector"])
            for d, vec in zip(docs, vectors, strict=True):
                if vec is not None:
                    cp.write_row((d.id, model_id, vec))


def refresh_stats(conn: psycopg.Connection[Any]) -> None:
    """Recompute ``field_stats`` and the planner's statistics after a write."""
    conn.execute("DELETE FROM field_stats")
    conn.execute(
        "INSERT INTO field_stats (field, doc_count, total_len)"
        " SELECT field, count(*), sum(len) FROM doc_lengths GROUP BY field"
    )
    conn.execute("ANALYZE terms")
    conn.execute("ANALYZE doc_lengths")


def copy_tables(conn: psycopg.Connection[Any], source: str, target: str) -> None:
    """Copy every index table from schema ``source`` into schema ``target`` and analyse them."""
    with conn.transaction():
        for table in INDEX_TABLES:
            conn.execute(
                sql.SQL("INSERT INTO {} SELECT * FROM {}").format(
                    sql.Identifier(target, table), sql.Identifier(source, table)
                )
            )
    # A bare ANALYZE would analyse every table of the database, the user's too.
    for table in INDEX_TABLES:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(target, table)))


def vacuum_tables(dsn: str, schema: str) -> None:
    """``VACUUM`` the index tables of ``schema`` (autocommit: VACUUM cannot run in a
    transaction), removing the dead row versions a rolled-back transaction left."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in INDEX_TABLES:
            conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(schema, table)))
