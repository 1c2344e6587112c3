"""Maintenance invariants: properties a search release must keep, checked against any target.

Each invariant is a plain typed function over a :class:`~pytest_searcheval.targets.SearchTarget`
(or, for the mutating ones, a :class:`~pytest_searcheval.targets.MutableTarget`) that returns an
:class:`InvariantOutcome`; nothing here needs pytest. :func:`cases` turns a collection into a
list of :class:`InvariantCase` objects with stable ids (``filter-monotonicity-q031``), which the
plugin collects as ``test_invariant[<id>]``. ``case.run(target)`` returns the outcome when the
invariant holds, raises :class:`InvariantFailure` (an ``AssertionError``) when it does not, and
skips (``pytest.skip`` when pytest is present, else :class:`InvariantSkipped`) when it cannot
be checked, with the reason.

The invariants (docs/invariants.md gives the exact definitions and every setting):

``known-item-stability``  a query with a known item ranks it at rank <= max_rank; one extra case
    (``known-item-stability-reindex``) re-indexes an isolated clone and requires the same.
``paraphrase-churn``      queries sharing a ``group`` keep RBO and Jaccard@k above bounds.
``filter-monotonicity``   along a chain of ever tighter filters no result is added and the
    relative order of the results that remain is preserved.
``threshold-compliance``  results satisfy the filters (independent oracle), the limit holds,
    scores do not increase, nothing is returned under a reported no-result decision, and an
    unanswerable query returns nothing.
``duplicate-resistance``  a keyword-stuffed and a near-duplicate copy of a known item, inserted
    into an isolated clone, neither push it from its rank nor take more than a bound of top-k.
``deletion-isolation``    a listing deleted from an isolated clone disappears at once and every
    other ranking is unchanged apart from its removal.
``filter-conformance``    the conformance set, alone in an isolated clone, answers every case
    with no violation and no miss.
``constraint-extraction`` extracted filters against the hand-labelled constraints, per field,
    and spurious filters.

Mutating invariants never touch the target itself: they work in ``target.isolated()``. A target
that is not a ``MutableTarget`` skips them with that reason.

Layout: this module makes the cases and summarises records; ``invariants_core`` holds settings,
outcomes and searching; ``invariants_ranking`` invariants 1-4, ``invariants_catalog`` 5-7,
``invariants_extraction`` 8; ``invariants_testing`` a correct and deliberately broken targets.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_searcheval.collection.model import Collection, Query
from pytest_searcheval.invariants.base import (
    EXTRACTION_FIELDS,
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
    check_conformance_case,
    check_deletion_isolation,
    check_duplicate_resistance,
    conformance_dir,
    near_duplicate,
    record_of,
    run_conformance,
    stuffed_copy,
)
from pytest_searcheval.invariants.extraction import check_extraction, extraction_counts
from pytest_searcheval.invariants.ranking import (
    check_filter_monotonicity,
    check_known_item,
    check_known_items_reindex,
    check_monotonic_step,
    check_paraphrase_churn,
    check_threshold_compliance,
    inversions,
)
from pytest_searcheval.invariants.registry import FAMILIES, cases_for, family_of, invariant, names
from pytest_searcheval.targets import SearchTarget

__all__ = [
    "EXTRACTION_FIELDS",
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
    "check_conformance_case",
    "check_deletion_isolation",
    "check_duplicate_resistance",
    "check_extraction",
    "check_filter_monotonicity",
    "check_known_item",
    "check_known_items_reindex",
    "check_monotonic_step",
    "check_paraphrase_churn",
    "check_threshold_compliance",
    "clear_caches",
    "conformance_dir",
    "extraction_counts",
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
    "run_conformance",
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


@invariant("filter-monotonicity", domain="x402")
def _monotonicity_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    from pytest_searcheval.x402.vocabulary import FILTER_KEYS

    add = Cases("filter-monotonicity")
    for q in queries_of(coll, s):
        if any(k in FILTER_KEYS for k in q.constraints):
            add(q.id, f"{q.id}: filter chain", check_filter_monotonicity, coll, q, s, query_id=q.id)
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


@invariant("filter-conformance", domain="x402")
def _conformance_family(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    return _conformance_cases(coll, s)


@invariant("constraint-extraction", domain="x402")
def _extraction_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    add = Cases("constraint-extraction")
    for name in (*EXTRACTION_FIELDS, "spurious"):
        add(name, f"extraction: {name}", check_extraction, coll, name, s)
    return add.out


def _conformance_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    path = conformance_dir(coll, s)

    def unavailable(reason: str) -> list[InvariantCase]:
        def skip(_: SearchTarget) -> InvariantOutcome:
            return InvariantOutcome(
                "filter-conformance-set", "filter-conformance", "skipped", reason
            )

        return [
            InvariantCase("filter-conformance-set", "filter-conformance", "conformance set", skip)
        ]

    if path is None or not (path / "cases.yaml").is_file():
        return unavailable(f"no conformance set at {path}/cases.yaml")
    from pytest_searcheval.x402.conformance import load_conformance

    # Expectations are checked per case (a disagreement with the oracle is shown, not fatal).
    conf = load_conformance(path, coll.assets, check_oracle=False)
    return [
        InvariantCase(
            f"filter-conformance-{case.id}",
            "filter-conformance",
            f"{case.id}: {json.dumps(case.filters, sort_keys=True)}",
            bind(check_conformance_case, coll, conf, case, s),
            mutates=True,
        )
        for case in conf.cases
    ]


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
