"""Filter conformance, an invariant of x402 collections: the conformance set (listings and
cases with their ``expect_ids``, :mod:`pytest_searcheval.x402.conformance`), written alone
into an isolated clone of the target, answers every case with no violation (by the oracle)
and no miss. One clone serves every case. Definition: docs/invariants.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_searcheval.collection.model import Collection
from pytest_searcheval.invariants import (
    NOT_MUTABLE,
    InvariantCase,
    InvariantOutcome,
    InvariantSettings,
    Searcher,
    Verdict,
    bind,
    invariant,
    isolated_clone,
    once_per_target,
    profile_of,
    record_of,
)
from pytest_searcheval.invariants.base import show_ids
from pytest_searcheval.targets import SearchTarget, write_in_bulk
from pytest_searcheval.x402.conformance import load_conformance
from pytest_searcheval.x402.oracle import violations


@invariant("filter-conformance", domain="x402", after="deletion-isolation")
def _conformance_family(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    return _conformance_cases(coll, s)


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


def conformance_dir(coll: Collection, settings: InvariantSettings) -> Path | None:
    if settings.conformance_dir:
        return Path(settings.conformance_dir)
    if coll.root:
        return Path(coll.root) / "conformance"
    return None


def run_conformance(
    target: SearchTarget, coll: Collection, conf: Any, settings: InvariantSettings
) -> dict[str, Any]:
    """Build the conformance target and answer every case; ``{"skip": reason}`` or
    ``{"answers": {case id: [ids]}, "setup": {...}}``.

    The clone is emptied of the collection's own listings and then holds exactly the
    conformance listings, so ``expect_ids`` is the complete set of listings that match.
    """
    with isolated_clone(target) as clone:
        if clone is None:
            return {"skip": NOT_MUTABLE}
        gone = [d for d in sorted(coll.documents) if d not in conf.documents]
        removed = len(gone)
        write_in_bulk(clone, "delete", gone)
        write_in_bulk(
            clone, "upsert", [record_of(conf.documents[d]) for d in sorted(conf.documents)]
        )
        search = Searcher(clone, profile_of(settings), cache=False)
        limit = max(settings.conformance_limit, len(conf.documents))
        answers: dict[str, list[str]] = {}
        for case in conf.cases:
            answers[case.id] = search(
                case.query, limit=limit, filters=case.filters, extract=False
            ).ids
    return {"answers": answers, "setup": {"removed": removed, "listings": len(conf.documents)}}


def check_conformance_case(
    target: SearchTarget,
    coll: Collection,
    conf: Any,
    case: Any,
    settings: InvariantSettings,
) -> InvariantOutcome:
    """No violation (a returned listing that breaks the case's filters, by the oracle, or that
    ``expect_ids`` does not list) and no miss (a listed listing not returned)."""
    cid = f"filter-conformance-{case.id}"
    v = Verdict(
        cid,
        "filter-conformance",
        f"conformance case {case.id}: query {case.query!r}, filters "
        f"{json.dumps(case.filters, sort_keys=True)} (profile {profile_of(settings)})",
    )
    run = once_per_target(
        target, "conformance", lambda: run_conformance(target, coll, conf, settings)
    )
    if "skip" in run:
        return v.skip(run["skip"])
    ids: list[str] = run["answers"][case.id]
    expected = set(case.expect_ids)
    oracle = {
        d for d, doc in conf.documents.items() if not violations(doc, case.filters, coll.assets)
    }
    n_violations = 0
    for rank, d in enumerate(ids, start=1):
        doc = conf.documents.get(d) or coll.documents.get(d)
        reasons = violations(doc, case.filters, coll.assets) if doc is not None else []
        if doc is None:
            reasons = ["not a listing of the conformance set"]
        elif d not in expected and not reasons:
            reasons = ["not in expect_ids"]
        if reasons:
            n_violations += 1
            v.fail(
                f"violation: rank {rank}: {d}: {'; '.join(reasons)}",
                code="filter-violation",
                subject=d,
            )
    misses = sorted(expected - set(ids))
    for d in misses:
        v.fail(
            f"miss: {d} ({conf.documents[d].title}) matches the filters but was not returned",
            code="conformance-miss",
            subject=d,
        )
    if oracle != expected:
        v.note(
            f"note: the oracle disagrees with expect_ids (oracle only: "
            f"{sorted(oracle - expected)}, expect_ids only: {sorted(expected - oracle)})"
        )
    if v.problems:
        v.note(f"returned: {show_ids(ids, 20)}")
        v.note(f"expected: {', '.join(sorted(expected)) or '(none)'}")
    v.details.update(
        case=case.id,
        expected=len(expected),
        returned=len(ids),
        violations=n_violations,
        misses=len(misses),
    )
    return v.done()
