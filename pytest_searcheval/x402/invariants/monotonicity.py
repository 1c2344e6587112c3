"""Filter monotonicity, an invariant of x402 collections: along a chain of ever tighter
filters (the labelled constraints, then network, scheme, asset, a lower price ceiling) no
result is added and the relative order of the results that remain is preserved. The chain's
values are read from the payment options of the current answer. Definition:
docs/invariants.md."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from pytest_searcheval.collection.model import Asset, Collection, Document, Query
from pytest_searcheval.invariants import (
    Cases,
    InvariantCase,
    InvariantOutcome,
    InvariantSettings,
    Searcher,
    Verdict,
    check_monotonic_step,
    invariant,
    once_per_target,
    profile_of,
    queries_of,
)
from pytest_searcheval.invariants.base import query_line, rank_of, show_ids, title_of
from pytest_searcheval.targets import SearchTarget
from pytest_searcheval.x402.oracle import (
    NETWORKS,
    OPTION_KEYS,
    SCHEMES,
    option_price_usd,
    violations,
)
from pytest_searcheval.x402.vocabulary import FILTER_KEYS


@invariant("filter-monotonicity", domain="x402", before="threshold-compliance")
def _monotonicity_cases(coll: Collection, s: InvariantSettings) -> list[InvariantCase]:
    add = Cases("filter-monotonicity")
    for q in queries_of(coll, s):
        if any(k in FILTER_KEYS for k in q.constraints):
            add(q.id, f"{q.id}: filter chain", check_filter_monotonicity, coll, q, s, query_id=q.id)
    return add.out


def _code_of(assets: Sequence[Asset], network: object, address: object) -> str | None:
    for a in assets:
        if a.network == network and a.address == address:
            return a.code
    return None


def _matching_options(
    doc: Document, filters: Mapping[str, Any], assets: Sequence[Asset]
) -> list[Mapping[str, Any]]:
    """The payment options of ``doc`` that satisfy every option-level filter on their own."""
    wire = doc.x402 or {}
    accepts = wire.get("accepts")
    options = [o for o in accepts if isinstance(o, Mapping)] if isinstance(accepts, list) else []
    option_filters = {k: v for k, v in filters.items() if k in OPTION_KEYS}
    out = []
    for option in options:
        probe = {"x402": {"type": wire.get("type"), "accepts": [option]}}
        if not violations(probe, option_filters, assets):
            out.append(option)
    return out


def _tighten(
    coll: Collection, filters: Mapping[str, Any], ids: Sequence[str], key: str
) -> dict[str, Any] | None:
    """One step of a filter chain: ``filters`` with ``key`` added or tightened, the value taken
    from the current answer so the chain keeps something to compare (``None``: no step)."""
    option_filters = {k: v for k, v in filters.items() if k in OPTION_KEYS}
    # The same listing meets the same option filters in many chains: judged once per collection.
    memo: dict[tuple[str, str], list[Mapping[str, Any]]] = once_per_target(
        coll, "matching-options", dict
    )
    shape = json.dumps(option_filters, sort_keys=True, default=str)
    options = []
    for d in ids:
        doc = coll.documents.get(d)
        if doc is None:
            continue
        found = memo.get((d, shape))
        if found is None:
            found = memo[(d, shape)] = _matching_options(doc, option_filters, coll.assets)
        options.extend(found)
    new = dict(filters)
    if key in ("network", "scheme", "asset"):
        if key in filters:
            return None
        if key == "asset":
            values = [_code_of(coll.assets, o.get("network"), o.get("asset")) for o in options]
        else:
            values = [o.get(key) for o in options]
        counts = Counter(str(x) for x in values if x)
        if counts:
            new[key] = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        elif key == "network":
            new[key] = NETWORKS[0]
        elif key == "scheme":
            new[key] = SCHEMES[0]
        elif coll.assets:
            new[key] = sorted(a.code for a in coll.assets)[0]
        else:
            return None
        return new
    # key == "max_price_usd": halve a ceiling; without one, the median price of the answer.
    if key in filters:
        try:
            ceiling = Decimal(str(filters[key]))
        except InvalidOperation:
            return None
        new[key] = format((ceiling / 2).normalize(), "f")
        return new
    prices = [p for p in (option_price_usd(o, coll.assets) for o in options) if p is not None]
    if not prices:
        return None
    median = statistics.median_low(prices)
    new[key] = format((Decimal(median.numerator) / Decimal(median.denominator)).normalize(), "f")
    return new


def check_filter_monotonicity(
    target: SearchTarget, coll: Collection, query: Query, settings: InvariantSettings
) -> InvariantOutcome:
    """Chain: no filters -> labelled constraints -> + network -> + scheme -> + asset -> lower
    price ceiling (each step adds a key absent so far or halves the ceiling). Explicit filters
    only (``extract=False``), so the chain is exactly what is listed. Each step must add no
    result and invert at most ``max_inversions`` pairs (see :func:`check_monotonic_step`)."""
    cid = f"filter-monotonicity-{query.id}"
    v = Verdict(cid, "filter-monotonicity", query_line(query, profile_of(settings)))
    search = Searcher(target, profile_of(settings), cache=True)
    limit = settings.chain_limit
    chain: list[dict[str, Any]] = [{}]
    base = {k: val for k, val in query.constraints.items() if k in FILTER_KEYS}
    if base:
        chain.append(base)
    responses = [search(query.text, limit=limit, filters=f, extract=False) for f in chain]
    for key in ("network", "scheme", "asset", "max_price_usd"):
        step = _tighten(coll, chain[-1], responses[-1].ids, key)
        if step is None:
            continue
        chain.append(step)
        responses.append(search(query.text, limit=limit, filters=step, extract=False))
    answers = [r.ids for r in responses]
    scores = [{h.id: h.score for h in r.hits} for r in responses]
    steps = []
    for i in range(1, len(chain)):
        added, inverted = check_monotonic_step(
            answers[i - 1], answers[i], limit, scores[i - 1], scores[i]
        )
        steps.append(
            {
                "filters": chain[i],
                "returned": len(answers[i]),
                "added": len(added),
                "inversions": len(inverted),
            }
        )
        wider = json.dumps(chain[i - 1], sort_keys=True)
        narrower = json.dumps(chain[i], sort_keys=True)
        for d in added:
            v.fail(
                f"tightening {wider} to {narrower} added {d!r} ({title_of(coll, d)}) at rank "
                f"{rank_of(answers[i], d)}: it was not among the {len(answers[i - 1])} results "
                f"of the wider filters"
                + (
                    " (that answer was full, but it now outranks listings that were in it)"
                    if len(answers[i - 1]) >= limit
                    else ""
                ),
                code="filter-added",
                subject=f"{narrower}:{d}",
            )
        if len(inverted) > settings.max_inversions:
            shown = "; ".join(
                f"{a} (rank {rank_of(answers[i - 1], a)}) above {b} (rank "
                f"{rank_of(answers[i - 1], b)}) became {rank_of(answers[i], a)} vs "
                f"{rank_of(answers[i], b)}"
                for a, b in inverted[:5]
            )
            v.fail(
                f"tightening {wider} to {narrower} reordered {len(inverted)} pair(s) of the "
                f"remaining results (at most {settings.max_inversions} allowed): {shown}",
                code="filter-reordered",
                subject=f"{wider}->{narrower}",
            )
        if added or len(inverted) > settings.max_inversions:
            v.note(f"{wider}: {show_ids(answers[i - 1])}")
            v.note(f"{narrower}: {show_ids(answers[i])}")
    v.details.update(query=query.id, steps=steps)
    return v.done()
