"""Constraint extraction, an invariant of x402 collections: the filters a target extracts
from the query text against the hand-labelled constraints, per field (network, type, asset,
price, scheme, extension), and the spurious ones. Definition: docs/invariants.md."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from pytest_searcheval.collection.model import Asset, Collection
from pytest_searcheval.invariants import (
    Cases,
    InvariantCase,
    InvariantOutcome,
    InvariantSettings,
    Searcher,
    Verdict,
    invariant,
    once_per_target,
    profile_of,
    queries_of,
)
from pytest_searcheval.targets import SearchTarget

#: Report field -> filter key, for constraint extraction accuracy.
EXTRACTION_FIELDS: dict[str, str] = {
    "network": "network",
    "type": "type",
    "asset": "asset",
    "price": "max_price_usd",
    "scheme": "scheme",
    "extension": "extension",
}


@invariant("constraint-extraction", domain="x402", after="filter-conformance")
def _extraction_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    add = Cases("constraint-extraction")
    for name in (*EXTRACTION_FIELDS, "spurious"):
        add(name, f"extraction: {name}", check_extraction, coll, name, s)
    return add.out


def _norm(key: str, value: object, assets: Sequence[Asset]) -> str:
    if key == "max_price_usd":
        try:
            return format(Decimal(str(value)).normalize(), "f")
        except InvalidOperation:
            return str(value)
    if key == "asset":
        for a in assets:
            if a.address == value:
                return a.code
    return str(value)


def extraction_counts(
    target: SearchTarget, coll: Collection, settings: InvariantSettings
) -> dict[str, Any]:
    """Per field: labelled (queries whose constraints name it), correct (extracted value equals
    the label; prices compared as decimals, an asset address counts as its code), wrong,
    missed; spurious: (query, key) pairs extracted without a label for that key."""
    search = Searcher(target, profile_of(settings), cache=True)
    fields = {f: {"labelled": 0, "correct": 0, "wrong": 0, "missed": 0} for f in EXTRACTION_FIELDS}
    spurious: list[str] = []
    wrong: list[str] = []
    any_extracted = False
    queries = queries_of(coll, settings)
    for q in queries:
        extracted = {
            k: val
            for k, val in search(q.text, limit=settings.limit).extracted_filters.items()
            if val is not None
        }
        any_extracted = any_extracted or bool(extracted)
        for name, key in EXTRACTION_FIELDS.items():
            if key not in q.constraints:
                continue
            row = fields[name]
            row["labelled"] += 1
            want = _norm(key, q.constraints[key], coll.assets)
            if key not in extracted:
                row["missed"] += 1
                wrong.append(f"{q.id} {q.text!r}: {key} {want!r} labelled, not extracted")
            elif _norm(key, extracted[key], coll.assets) == want:
                row["correct"] += 1
            else:
                row["wrong"] += 1
                wrong.append(
                    f"{q.id} {q.text!r}: {key} {want!r} labelled, {extracted[key]!r} extracted"
                )
        for key in sorted(extracted):
            if key not in q.constraints:
                spurious.append(f"{q.id} {q.text!r}: spurious {key}={extracted[key]!r}")
    return {
        "queries": len(queries),
        "fields": fields,
        "spurious": spurious,
        "errors": wrong,
        "any_extracted": any_extracted,
    }


def check_extraction(
    target: SearchTarget, coll: Collection, field_name: str, settings: InvariantSettings
) -> InvariantOutcome:
    """``field_name`` in :data:`EXTRACTION_FIELDS`: accuracy = correct / labelled must be at least
    ``extraction_min_accuracy``; ``"spurious"``: at most ``extraction_max_spurious`` spurious
    filters over the split. Skipped when the target extracted nothing from any query."""
    cid = f"constraint-extraction-{field_name}"
    v = Verdict(cid, "constraint-extraction", f"constraint extraction: {field_name}")
    counts = once_per_target(
        target, "extraction", lambda: extraction_counts(target, coll, settings)
    )
    if not counts["any_extracted"]:
        return v.skip("the target extracted no filter from any query (no extraction to measure)")
    if field_name == "spurious":
        v.details.update(spurious=len(counts["spurious"]), queries=counts["queries"])
        if len(counts["spurious"]) > settings.extraction_max_spurious:
            v.fail(
                f"{len(counts['spurious'])} spurious filter(s) over {counts['queries']} queries "
                f"(at most {settings.extraction_max_spurious})",
                code="spurious-filters",
            )
            for line in counts["spurious"][:20]:
                v.note(f"  {line}")
        return v.done()
    key = EXTRACTION_FIELDS[field_name]
    row = counts["fields"][field_name]
    if row["labelled"] == 0:
        return v.skip(f"no query of the split labels {key}")
    accuracy = row["correct"] / row["labelled"]
    v.details.update(field=field_name, accuracy=round(accuracy, 6), **row)
    if accuracy < settings.extraction_min_accuracy:
        v.fail(
            f"{key}: {row['correct']}/{row['labelled']} correct ({accuracy:.3f} < "
            f"{settings.extraction_min_accuracy:g}); {row['wrong']} wrong, {row['missed']} missed",
            code="extraction-accuracy",
            subject=key,
        )
        for line in [e for e in counts["errors"] if f": {key} " in e][:20]:
            v.note(f"  {line}")
    return v.done()
