"""Invariants that change the catalog of an isolated clone: duplicate resistance (5),
deletion isolation (6), filter conformance (7). Definitions: docs/invariants.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_searcheval.collection.model import Collection, Document, Query
from pytest_searcheval.invariants.base import (
    NOT_MUTABLE,
    InvariantOutcome,
    InvariantSettings,
    Searcher,
    Verdict,
    isolated_clone,
    profile_of,
    query_line,
    rank_of,
    show_ids,
    title_of,
)
from pytest_searcheval.jsonsafe import json_safe
from pytest_searcheval.targets import SearchTarget

# ------------------------------------------------------------------------------ records


def record_of(doc: Document) -> dict[str, Any]:
    """The JSON record of a document (the body of an upsert)."""
    return json_safe(
        {
            "id": doc.id,
            "title": doc.title,
            "text": doc.text,
            "fields": doc.fields,
            "x402": doc.x402,
            "sidecar": doc.sidecar,
        }
    )


def _renamed(record: dict[str, Any], new_id: str, host: str) -> dict[str, Any]:
    """The record under a new id, its resource moved to ``host`` (same path). The host holds no
    word of the original, so a URL-indexing engine gains no query term from it."""
    record["id"] = new_id
    wire = record.get("x402")
    if isinstance(wire, dict) and isinstance(wire.get("resource"), str):
        scheme, sep, rest = wire["resource"].partition("://")
        _, slash, path = rest.partition("/")
        wire["resource"] = f"{scheme}{sep}{host}{slash}{path}" if sep else f"https://{host}/"
    return record


def stuffed_copy(doc: Document, query_text: str) -> dict[str, Any]:
    """A keyword-stuffed copy: the query repeated in the title and fifteen times in the text,
    before the genuine description; a new resource URL; no settlement history (a new listing)."""
    rec = _renamed(record_of(doc), f"{doc.id}~stuffed", "copy-one.example")
    rec["title"] = f"{query_text} {query_text} {doc.title} {query_text}"
    rec["text"] = " ".join([query_text] * 15) + " " + doc.text
    if isinstance(rec.get("x402"), dict):
        rec["x402"]["description"] = rec["text"]
    sidecar = dict(rec.get("sidecar") or {})
    sidecar.update(adversarial="keyword-stuffing", duplicate_of=doc.id, settlements=0)
    rec["sidecar"] = sidecar
    return rec


def near_duplicate(doc: Document) -> dict[str, Any]:
    """A near-duplicate copy: same title and description plus one sentence, a new resource URL,
    no settlement history."""
    rec = _renamed(record_of(doc), f"{doc.id}~near-duplicate", "copy-two.example")
    rec["text"] = doc.text + " Mirrored listing of the same service."
    if isinstance(rec.get("x402"), dict):
        rec["x402"]["description"] = rec["text"]
    sidecar = dict(rec.get("sidecar") or {})
    sidecar.update(adversarial="near-duplicate", duplicate_of=doc.id, settlements=0)
    rec["sidecar"] = sidecar
    return rec


# ------------------------------------------------------------------------------ 5 duplicates


def check_duplicate_resistance(
    target: SearchTarget,
    coll: Collection,
    query: Query,
    doc_id: str,
    settings: InvariantSettings,
) -> InvariantOutcome:
    """On an isolated clone holding a stuffed and a near-duplicate copy of the known item of
    ``query``: the genuine listing is still at rank <= max_rank (when it was before the
    insertion; otherwise the case is skipped), and at most ``duplicate_max_copies`` copies
    displace: are in the new top ``duplicate_k`` above a listing that was in the top
    ``duplicate_k`` before the insertion (copies may fill slots nothing genuine held)."""
    cid = f"duplicate-resistance-{doc_id}"
    v = Verdict(
        cid,
        "duplicate-resistance",
        f"{query_line(query, profile_of(settings))}: genuine {doc_id!r} ({title_of(coll, doc_id)}) "
        f"against a keyword-stuffed and a near-duplicate copy",
    )
    doc = coll.documents.get(doc_id)
    if doc is None:
        return v.skip(f"known item {doc_id!r} is not a document of the collection")
    bound = settings.known_item_max_rank
    k = settings.duplicate_k
    limit = max(settings.limit, k, bound)
    copies = [stuffed_copy(doc, query.text), near_duplicate(doc)]
    copy_ids = {c["id"] for c in copies}
    with isolated_clone(target) as clone:
        if clone is None:
            return v.skip(NOT_MUTABLE)
        search = Searcher(clone, profile_of(settings), cache=False)
        before = search(query.text, limit=limit).ids
        r0 = rank_of(before, doc_id)
        if r0 is None or r0 > bound:
            return v.skip(
                f"precondition not met: {doc_id!r} is at rank {r0} before any copy is inserted "
                f"(known-item-stability-{query.id} reports it)"
            )
        for c in copies:
            clone.upsert(c)
        after = search(query.text, limit=limit).ids
    r1 = rank_of(after, doc_id)
    # A copy displaces when, in the new top k, it outranks a listing of the former top k.
    pos = {d: i for i, d in enumerate(after)}
    former = [d for d in before[:k] if d not in copy_ids]
    in_top = [
        c
        for c in after[:k]
        if c in copy_ids and any(pos[c] < pos.get(d, len(after)) for d in former)
    ]
    v.details.update(
        query=query.id,
        doc=doc_id,
        rank_before=r0,
        rank_after=r1,
        copies_in_top_k=sum(1 for d in after[:k] if d in copy_ids),
        displacing_copies=len(in_top),
        copy_ranks={c: rank_of(after, c) for c in sorted(copy_ids)},
    )
    if r1 is None or r1 > bound:
        v.fail(
            f"genuine {doc_id!r} expected at rank <= {bound} with the copies present, found "
            f"{'rank ' + str(r1) if r1 else 'absent'} (rank {r0} before)",
            code="genuine-displaced",
            subject=doc_id,
        )
    if len(in_top) > settings.duplicate_max_copies:
        v.fail(
            f"{len(in_top)} copies outrank listings of the former top {k} (at most "
            f"{settings.duplicate_max_copies}): "
            + ", ".join(f"{c} at rank {rank_of(after, c)}" for c in in_top),
            code="copies-in-top",
            subject=doc_id,
        )
    if v.problems:
        v.note(f"before: {show_ids(before)}")
        v.note(f"after:  {show_ids(after)}")
    return v.done()


# ------------------------------------------------------------------------------ 6 deletion


def check_deletion_isolation(
    target: SearchTarget,
    coll: Collection,
    subject: Query,
    doc_id: str | None,
    probes: Sequence[Query],
    settings: InvariantSettings,
) -> InvariantOutcome:
    """On an isolated clone, delete ``doc_id`` (the known item of ``subject``; ``None``: the
    clone's rank-1 result for ``subject``) and search the probe queries again at once.

    Each probe's answer A0 (before) and A1 (after), cut at ``limit``; E = A0 without the
    deleted listing. Required: the listing is in no A1; if A0 was not full, A1 == E; if it was
    full, A1 starts with E (one listing from beyond the cut may follow). A probe whose A1 is
    empty is accepted only when the deleted listing was its rank-1 result (a no-result
    threshold may then rightly withhold the rest).
    """
    cid = f"deletion-isolation-{subject.id}"
    what = (
        f"its known item {doc_id!r} ({title_of(coll, doc_id)})" if doc_id else "its rank-1 result"
    )
    v = Verdict(
        cid,
        "deletion-isolation",
        f"{query_line(subject, profile_of(settings))}: delete {what}, "
        f"then search {len(probes)} probe queries",
    )
    limit = settings.limit
    with isolated_clone(target) as clone:
        if clone is None:
            return v.skip(NOT_MUTABLE)
        search = Searcher(clone, profile_of(settings), cache=False)
        before = {q.id: search(q.text, limit=limit).ids for q in probes}
        if doc_id is None:
            top = before.get(subject.id) or search(subject.text, limit=limit).ids
            if not top:
                return v.skip(f"{subject.id} returned nothing to delete")
            doc_id = top[0]
            v.note(f"deleted listing: {doc_id!r} ({title_of(coll, doc_id)})")
        clone.delete(doc_id)
        after = {q.id: search(q.text, limit=limit).ids for q in probes}
    held = sum(1 for q in probes if doc_id in before[q.id])
    changed = 0
    for q in probes:
        a0, a1 = before[q.id], after[q.id]
        expected = [d for d in a0 if d != doc_id]
        if doc_id in a1:
            v.fail(
                f"{q.id} {q.text!r}: deleted {doc_id!r} still returned at rank "
                f"{rank_of(a1, doc_id)}",
                code="deleted-returned",
                subject=f"{q.id}:{doc_id}",
            )
        ok = a1 == expected if len(a0) < limit else a1[: len(expected)] == expected
        if not ok and not a1 and a0[:1] == [doc_id]:
            ok = True
        if not ok:
            changed += 1
            at = next(
                (i for i, (x, y) in enumerate(zip(expected, a1, strict=False)) if x != y),
                min(len(expected), len(a1)),
            )
            v.fail(
                f"{q.id} {q.text!r}: ranking changed beyond the removal of {doc_id!r}, from "
                f"rank {at + 1}: expected {expected[at : at + 4]}, got {a1[at : at + 4]}",
                code="ranking-changed",
                subject=q.id,
            )
            v.note(f"{q.id} before: {show_ids(a0)}")
            v.note(f"{q.id} after:  {show_ids(a1)}")
    v.details.update(doc=doc_id, probes=len(probes), probes_holding_it=held, changed=changed)
    return v.done()
