"""Maintenance invariants: properties a search release must keep, checked against any target.

Each invariant is a plain typed function over a :class:`~pytest_searcheval.targets.SearchTarget`
(or, for the mutating ones, a :class:`~pytest_searcheval.targets.MutableTarget`) that returns an
:class:`InvariantOutcome`; nothing here needs pytest. :func:`cases` turns a collection into a
list of :class:`InvariantCase` objects with stable ids (``filter-monotonicity-q031``), which the
plugin collects as ``test_invariant[<id>]``. ``case.run(target)`` returns the outcome when the
invariant holds, raises :class:`InvariantFailure` (an ``AssertionError``) when it does not, and
skips (``pytest.skip`` when pytest is present, else :class:`InvariantSkipped`) when it cannot
be checked, with the reason.

The generic families, registered here, run on any collection (docs/invariants.md gives the
exact definitions and every setting):

``known-item-stability``  a query with a known item ranks it at rank <= max_rank; one extra case
    (``known-item-stability-reindex``) re-indexes an isolated clone and requires the same.
``paraphrase-churn``      queries sharing a ``group`` keep RBO and Jaccard@k above bounds.
``threshold-compliance``  the limit holds, scores do not increase, nothing is returned under a
    reported no-result decision, every result is a document of the collection and satisfies
    the explicit and applied filters (judged by the collection's domain), and an unanswerable
    query returns nothing; those last checks are left to the plugin's query test only for a
    query the session's query tests judge (selected, no search error; the same request, no
    explicit filters).
``duplicate-resistance``  a keyword-stuffed and a near-duplicate copy of a known item, inserted
    into an isolated clone, neither push it from its rank nor take more than a bound of top-k.
``deletion-isolation``    a listing deleted from an isolated clone disappears at once and every
    other ranking is unchanged apart from its removal.

A domain plugs in families of its own through the same registry (:func:`invariant` with
``domain=``): the x402 ones (``filter-monotonicity``, ``filter-conformance``,
``constraint-extraction``) live in :mod:`pytest_searcheval.x402.invariants` and register when
the x402 domain is loaded; this package imports nothing of x402.

Mutating invariants never touch the target itself: they work in ``target.isolated()``. A target
that is not a ``MutableTarget`` skips them with that reason.

Layout: this module makes the generic cases and summarises records; ``registry`` holds the
families in collection order; ``base`` settings, outcomes, cases and searching; ``ranking``
known items, churn, threshold compliance and the comparison of two rankings; ``catalog``
duplicate resistance and deletion isolation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_searcheval.collection.model import Collection, Query
from pytest_searcheval.invariants.base import (
    NOT_MUTABLE,
    Cases,
    InvariantCase,
    InvariantFailure,
    InvariantOutcome,
    InvariantSettings,
    InvariantSkipped,
    Searcher,
    Verdict,
    bind,
    clear_caches,
    isolated_clone,
    known_items,
    once_per_target,
    profile_of,
    queries_of,
    settings_from,
)
from pytest_searcheval.invariants.catalog import (
    check_deletion_isolation,
    check_duplicate_resistance,
    near_duplicate,
    record_of,
    stuffed_copy,
)
from pytest_searcheval.invariants.ranking import (
    check_known_item,
    check_known_items_reindex,
    check_monotonic_step,
    check_paraphrase_churn,
    check_threshold_compliance,
    inversions,
)
from pytest_searcheval.invariants.registry import FAMILIES, cases_for, family_of, invariant, names

__all__ = [
    "FAMILIES",
    "NOT_MUTABLE",
    "Cases",
    "InvariantCase",
    "InvariantFailure",
    "InvariantOutcome",
    "InvariantSettings",
    "InvariantSkipped",
    "Searcher",
    "Verdict",
    "bind",
    "cases",
    "cases_for",
    "check_deletion_isolation",
    "check_duplicate_resistance",
    "check_known_item",
    "check_known_items_reindex",
    "check_monotonic_step",
    "check_paraphrase_churn",
    "check_threshold_compliance",
    "clear_caches",
    "family_of",
    "invariant",
    "inversions",
    "isolated_clone",
    "known_items",
    "names",
    "near_duplicate",
    "once_per_target",
    "profile_of",
    "queries_of",
    "record_of",
    "settings_from",
    "stuffed_copy",
    "summarize",
]

# ------------------------------------------------------------------------------ cases


def cases(collection: Collection, settings: object = None) -> list[InvariantCase]:
    """Every invariant case of ``collection`` for the configured split, in a stable order:
    the registered families (built-in and a conftest's own, see :func:`invariant`) in order of
    registration. ``settings``: see :func:`settings_from` (the plugin passes its config)."""
    return cases_for(collection, settings)


def _known(coll: Collection, s: InvariantSettings) -> dict[str, tuple[str, int | None]]:
    in_split = {q.id for q in queries_of(coll, s)}
    return {q: item for q, item in known_items(coll).items() if q in in_split}


def _dup_items(coll: Collection, s: InvariantSettings) -> list[tuple[str, str]]:
    known = _known(coll, s)
    return [(qid, known[qid][0]) for qid in sorted(known) if coll.queries[qid].source is None]


@invariant("known-item-stability")
def _known_item_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    add = Cases("known-item-stability")
    known = _known(coll, s)
    for qid in sorted(known):
        doc_id, max_rank = known[qid]
        add(
            qid,
            f"{qid}: {doc_id} at rank <= {max_rank or s.known_item_max_rank}",
            check_known_item,
            coll,
            coll.queries[qid],
            doc_id,
            s,
            max_rank,
            query_id=qid,
        )
    if known:
        add(
            "reindex",
            f"{len(known)} known items across a re-index",
            check_known_items_reindex,
            coll,
            known,
            s,
            mutates=True,
        )
    return add.out


@invariant("paraphrase-churn")
def _churn_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    add = Cases("paraphrase-churn")
    groups: dict[str, list[Query]] = {}
    for q in queries_of(coll, s):
        if q.group:
            groups.setdefault(q.group, []).append(q)
    for group, members in sorted(groups.items()):
        if len(members) >= 2:
            add(
                group,
                f"group {group}: {', '.join(m.id for m in members)}",
                check_paraphrase_churn,
                coll,
                group,
                members,
                s,
                query_id=members[0].id,
            )
    return add.out


@invariant("threshold-compliance")
def _threshold_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    add = Cases("threshold-compliance")
    for q in queries_of(coll, s):
        add(
            q.id,
            f"{q.id}: results within filters and thresholds",
            check_threshold_compliance,
            coll,
            q,
            s,
            query_id=q.id,
        )
    return add.out


@invariant("duplicate-resistance")
def _duplicate_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    add = Cases("duplicate-resistance")
    seen: set[str] = set()
    for qid, doc_id in _dup_items(coll, s):
        if doc_id in seen or len(seen) >= s.duplicate_items:
            continue
        seen.add(doc_id)
        add(
            doc_id,
            f"{doc_id} for {qid} against stuffed and near-duplicate copies",
            check_duplicate_resistance,
            coll,
            coll.queries[qid],
            doc_id,
            s,
            query_id=qid,
            mutates=True,
        )
    return add.out


@invariant("deletion-isolation")
def _deletion_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    # Deletion subjects: queries with a known item first, then answerable exact-name queries,
    # then any answerable query (their rank-1 result is deleted).
    add = Cases("deletion-isolation")
    queries = queries_of(coll, s)
    answerable = [q for q in queries if not q.unanswerable]
    subjects: list[tuple[Query, str | None]] = []
    used: set[str] = set()
    for qid, doc_id in _dup_items(coll, s):
        if doc_id not in used:
            used.add(doc_id)
            subjects.append((coll.queries[qid], doc_id))
    taken = {q.id for q, _ in subjects}
    ordered = sorted(
        answerable, key=lambda q: (q.query_class != "exact-name", q.source is not None)
    )
    subjects += [(q, None) for q in ordered if q.id not in taken]
    for subject, victim in subjects[: s.deletion_items]:
        others = [q for q in answerable if q.id != subject.id]
        probes = [subject, *others[: s.deletion_probes - 1]]
        add(
            subject.id,
            f"{subject.id}: delete {victim or 'its rank-1 result'}; {len(probes)} probe queries",
            check_deletion_isolation,
            coll,
            subject,
            victim,
            probes,
            s,
            query_id=subject.id,
            mutates=True,
        )
    return add.out


# ------------------------------------------------------------------------------ summary


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per-invariant summary rows for the report and the gate, from case records
    (:meth:`InvariantOutcome.record`, or the plugin's ``{id, passed, ...}`` rows).

    ``{"invariants": {name: {"cases", "passed", "failed", "skipped", "failing": [ids]}},
    "conformance": {"cases", "violations", "misses"} | None,
    "extraction": {"fields": {field: {"labelled", "correct", "accuracy"}}, "spurious"} | None}``
    """
    per: dict[str, dict[str, Any]] = {}
    conformance: dict[str, int] | None = None
    extraction: dict[str, Any] | None = None
    for rec in records:
        cid = str(rec.get("id", ""))
        name = str(rec.get("invariant") or family_of(cid) or cid)
        status = str(rec.get("status") or ("passed" if rec.get("passed") else "failed"))
        row = per.setdefault(
            name, {"cases": 0, "passed": 0, "failed": 0, "skipped": 0, "failing": []}
        )
        row["cases"] += 1
        if status == "errored":  # its search errored: counted apart, by the error rule
            row["errored"] = row.get("errored", 0) + 1
            continue
        row[status if status in ("passed", "failed", "skipped") else "failed"] += 1
        if status == "failed":
            row["failing"].append(cid)
        details = rec.get("details") or {}
        if name == "filter-conformance" and "violations" in details:
            conformance = conformance or {"cases": 0, "violations": 0, "misses": 0}
            conformance["cases"] += 1
            conformance["violations"] += int(details["violations"])
            conformance["misses"] += int(details["misses"])
        if name == "constraint-extraction" and details:
            extraction = extraction or {"fields": {}, "spurious": None}
            if "field" in details:
                extraction["fields"][details["field"]] = {
                    "labelled": details["labelled"],
                    "correct": details["correct"],
                    "accuracy": details["accuracy"],
                }
            elif "spurious" in details:
                extraction["spurious"] = details["spurious"]
    for row in per.values():
        row["failing"].sort()
    return {
        "invariants": dict(sorted(per.items())),
        "conformance": conformance,
        "extraction": extraction,
    }
