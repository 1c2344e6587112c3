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
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from .collection_model import Asset, Collection, Document, Query
from .targets import FILTER_KEYS, MutableTarget, SearchResponse, SearchTarget, TargetUnavailable

__all__ = [
    "EXTRACTION_FIELDS",
    "INVARIANTS",
    "InvariantCase",
    "InvariantFailure",
    "InvariantOutcome",
    "InvariantSettings",
    "InvariantSkipped",
    "cases",
    "known_items",
    "settings_from",
    "summarize",
]

#: Invariant names; every case id is ``<name>-<subject>``.
INVARIANTS: tuple[str, ...] = (
    "known-item-stability",
    "paraphrase-churn",
    "filter-monotonicity",
    "threshold-compliance",
    "duplicate-resistance",
    "deletion-isolation",
    "filter-conformance",
    "constraint-extraction",
)
#: Report field -> filter key, for constraint extraction accuracy.
EXTRACTION_FIELDS: dict[str, str] = {
    "network": "network",
    "type": "type",
    "asset": "asset",
    "price": "max_price_usd",
    "scheme": "scheme",
}
SHOWN = 8  # ranked ids shown in a failure message


# ------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class InvariantSettings:
    """Every knob of the invariants. Defaults are policy choices, not measured values."""

    profile: str = "hybrid"
    split: str = "all"
    limit: int = 20
    known_item_max_rank: int = 1
    churn_k: int = 10
    churn_rbo_p: float = 0.9
    churn_min_rbo: float = 0.2
    churn_min_jaccard: float = 0.1
    chain_limit: int = 100
    max_inversions: int = 0
    duplicate_items: int = 5
    duplicate_k: int = 10
    duplicate_max_copies: int = 1
    deletion_items: int = 3
    deletion_probes: int = 12
    conformance_dir: str | None = None
    conformance_limit: int = 1000
    extraction_min_accuracy: float = 0.9
    extraction_max_spurious: int = 0
    enabled: tuple[str, ...] = INVARIANTS

    def __post_init__(self) -> None:
        problems = []
        for name in ("limit", "known_item_max_rank", "churn_k", "chain_limit", "duplicate_k"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name}: expected an integer >= 1, got {getattr(self, name)!r}")
        if not 0.0 < self.churn_rbo_p < 1.0:
            problems.append(f"churn_rbo_p: expected a number in (0, 1), got {self.churn_rbo_p!r}")
        unknown = [e for e in self.enabled if e not in INVARIANTS]
        if unknown:
            problems.append(
                f"enabled: unknown invariant(s) {', '.join(unknown)}; "
                f"expected names from {', '.join(INVARIANTS)}"
            )
        if problems:
            raise ValueError("invariant settings: " + "; ".join(problems))


def settings_from(source: object = None) -> InvariantSettings:
    """Settings from ``None`` (defaults), an :class:`InvariantSettings`, a mapping of field
    overrides, or the plugin's ``SearchEvalConfig`` (its ``gated_profile``, ``split`` and
    ``limit``, then the mapping in ``extra["invariants"]`` if any)."""
    if source is None:
        return InvariantSettings()
    if isinstance(source, InvariantSettings):
        return source
    base: dict[str, Any] = {}
    overrides: Mapping[str, Any]
    if isinstance(source, Mapping):
        overrides = source
    else:
        for attr, key in (("gated_profile", "profile"), ("split", "split"), ("limit", "limit")):
            value = getattr(source, attr, None)
            if value is not None:
                base[key] = value
        extra = getattr(source, "extra", None) or {}
        overrides = extra.get("invariants") or {} if isinstance(extra, Mapping) else {}
    known = {f.name for f in dataclasses.fields(InvariantSettings)}
    unknown = sorted(str(k) for k in overrides if k not in known)
    if unknown:
        raise ValueError(
            f"invariant settings: unknown key(s) {', '.join(unknown)}; "
            f"expected some of {', '.join(sorted(known))}"
        )
    merged = base | dict(overrides)
    if "enabled" in merged:
        merged["enabled"] = tuple(merged["enabled"])
    return InvariantSettings(**merged)


# ------------------------------------------------------------------------------ outcomes


@dataclass
class InvariantOutcome:
    """The result of one case. ``details`` is JSON-safe and feeds :func:`summarize`."""

    case_id: str
    invariant: str
    status: str  # "passed" | "failed" | "skipped"
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def record(self) -> dict[str, Any]:
        """The JSON-safe row the report keeps (``id``, ``invariant``, ``passed``, ...)."""
        return _json_safe(
            {
                "id": self.case_id,
                "invariant": self.invariant,
                "status": self.status,
                "passed": self.passed,
                "message": self.message,
                "details": self.details,
            }
        )


def _json_safe(value: object) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return out


class InvariantFailure(AssertionError):
    """An invariant does not hold; ``str()`` names query, documents, expectation, outcome."""

    def __init__(self, outcome: InvariantOutcome) -> None:
        self.outcome = outcome
        super().__init__(outcome.message)


class InvariantSkipped(Exception):
    """An invariant cannot be checked on this target (raised only when pytest is absent)."""


@dataclass(frozen=True)
class InvariantCase:
    """One generated check; ``id`` is stable across runs (invariant name + subject)."""

    id: str
    invariant: str
    name: str
    check: Callable[[SearchTarget], InvariantOutcome] = field(repr=False, compare=False)

    def outcome(self, target: SearchTarget) -> InvariantOutcome:
        """Run the check and never raise for the invariant's own verdict."""
        try:
            return self.check(target)
        except TargetUnavailable as exc:
            return InvariantOutcome(
                self.id,
                self.invariant,
                "failed",
                f"{self.id}: the target could not answer: {exc}",
                {"unavailable": str(exc)},
            )

    def run(self, target: SearchTarget) -> InvariantOutcome:
        """The outcome when the invariant holds; raise on failure; skip when not checkable."""
        __tracebackhide__ = True
        outcome = self.outcome(target)
        if outcome.status == "failed":
            raise InvariantFailure(outcome)
        if outcome.status == "skipped":
            try:
                import pytest
            except ModuleNotFoundError:  # pragma: no cover - pytest is a dependency
                raise InvariantSkipped(outcome.message) from None
            pytest.skip(outcome.message)
        return outcome


class _Verdict:
    """Collects problems and details while a check runs, then becomes an outcome."""

    def __init__(self, case_id: str, invariant: str, headline: str) -> None:
        self.case_id = case_id
        self.invariant = invariant
        self.headline = headline
        self.problems: list[str] = []
        self.context: list[str] = []
        self.details: dict[str, Any] = {}

    def fail(self, problem: str) -> None:
        self.problems.append(problem)

    def note(self, line: str) -> None:
        self.context.append(line)

    def skip(self, reason: str) -> InvariantOutcome:
        return InvariantOutcome(
            self.case_id, self.invariant, "skipped", f"{self.case_id}: {reason}", self.details
        )

    def done(self) -> InvariantOutcome:
        self.details["problems"] = len(self.problems)
        if not self.problems:
            return InvariantOutcome(self.case_id, self.invariant, "passed", "", self.details)
        lines = [f"{self.case_id}: {self.headline}", "failed:"]
        lines += [f"  - {p}" for p in self.problems[:50]]
        if len(self.problems) > 50:
            lines.append(f"  ... and {len(self.problems) - 50} more")
        lines += self.context
        return InvariantOutcome(
            self.case_id, self.invariant, "failed", "\n".join(lines), self.details
        )


# ------------------------------------------------------------------------------ searching


class _Searcher:
    """Searches one target with one profile; caches answers for targets that do not change."""

    def __init__(self, target: SearchTarget, profile: str, *, cache: bool) -> None:
        self.target = target
        self.profile = profile
        self._cache: dict[tuple[str, int, str, bool], SearchResponse] | None = (
            _shared_cache(target) if cache else None
        )

    def __call__(
        self,
        text: str,
        *,
        limit: int,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        key = (text, limit, json.dumps(dict(filters or {}), sort_keys=True, default=str), extract)
        if self._cache is not None and key in self._cache:
            return self._cache[key]
        response = self.target.search(
            text, profile=self.profile, limit=limit, filters=dict(filters or {}), extract=extract
        )
        if self._cache is not None:
            self._cache[key] = response
        return response


# Keyed by id(target) and holding the target itself, so the id cannot be reused while cached.
_CACHES: dict[int, tuple[object, dict[tuple[str, int, str, bool], SearchResponse]]] = {}
_SHARED: dict[tuple[int, str], Any] = {}


def _shared_cache(target: object) -> dict[tuple[str, int, str, bool], SearchResponse]:
    entry = _CACHES.get(id(target))
    if entry is None or entry[0] is not target:
        entry = (target, {})
        _CACHES[id(target)] = entry
    return entry[1]


def _shared(target: object, key: str, compute: Callable[[], Any]) -> Any:
    """Compute once per (target, key) in this process: one clone serves a family of cases."""
    slot = (id(target), key)
    entry = _SHARED.get(slot)
    if entry is None or entry[0] is not target:
        entry = (target, compute())
        _SHARED[slot] = entry
    return entry[1]


def clear_caches() -> None:
    """Forget cached answers (tests and long-lived processes that rebuild targets)."""
    _CACHES.clear()
    _SHARED.clear()


@contextmanager
def _clone(target: SearchTarget) -> Iterator[MutableTarget | None]:
    if not isinstance(target, MutableTarget):
        yield None
        return
    with target.isolated() as clone:
        yield clone


NOT_MUTABLE = (
    "the target is not a MutableTarget (no upsert/delete/reindex/isolated), so this mutating "
    "invariant cannot run on an isolated copy; give the plugin a mutable target to check it"
)


# ------------------------------------------------------------------------------ helpers


def _title(coll: Collection, doc_id: str) -> str:
    doc = coll.documents.get(doc_id)
    return doc.title if doc is not None else "(not in the collection)"


def _show_ids(ids: Sequence[str], limit: int = SHOWN) -> str:
    if not ids:
        return "(no results)"
    shown = ", ".join(f"{r}:{d}" for r, d in enumerate(ids[:limit], start=1))
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


def _rank(ids: Sequence[str], doc_id: str) -> int | None:
    try:
        return list(ids).index(doc_id) + 1
    except ValueError:
        return None


def _unanswerable(query: Query) -> bool:
    return bool(query.expect.get("no_result")) or query.query_class == "no-result"


def _queries(coll: Collection, settings: InvariantSettings) -> list[Query]:
    return list(coll.queries_in(settings.split))


def _qline(query: Query, profile: str) -> str:
    return f"query {query.id} {query.text!r} [{query.query_class}] (profile {profile})"


def known_items(collection: Collection) -> dict[str, tuple[str, int | None]]:
    """query id -> (known item, declared max_rank or None).

    A query's known item is ``expect.known_item`` when declared. Otherwise an ``exact-name``
    query whose judgments hold exactly one document at the top grade has that document as its
    known item (several top-grade documents make it ambiguous: no known item). A typo query
    (``source`` set) inherits its source's known item unless it declares its own.
    """
    top = max(collection.grades or [3])
    out: dict[str, tuple[str, int | None]] = {}
    for q in collection.queries.values():
        declared = q.expect.get("known_item")
        max_rank = q.expect.get("max_rank")
        if declared:
            out[q.id] = (str(declared), int(max_rank) if max_rank else None)
        elif q.query_class == "exact-name" and not _unanswerable(q):
            best = [d for d, g in collection.judgments.get(q.id, {}).items() if g == top]
            if len(best) == 1 and best[0] in collection.documents:
                out[q.id] = (best[0], int(max_rank) if max_rank else None)
    for q in collection.queries.values():
        if q.id not in out and q.source and q.source in out and not _unanswerable(q):
            out[q.id] = out[q.source]
    return out


# ------------------------------------------------------------------------------ 1 known items


def check_known_item(
    target: SearchTarget,
    coll: Collection,
    query: Query,
    doc_id: str,
    settings: InvariantSettings,
    max_rank: int | None = None,
) -> InvariantOutcome:
    """The known item of ``query`` is at rank <= max_rank."""
    bound = max_rank or settings.known_item_max_rank
    cid = f"known-item-stability-{query.id}"
    v = _Verdict(cid, "known-item-stability", _qline(query, settings.profile))
    search = _Searcher(target, settings.profile, cache=True)
    ids = search(query.text, limit=max(settings.limit, bound)).ids
    rank = _rank(ids, doc_id)
    v.details.update(query=query.id, doc=doc_id, rank=rank, max_rank=bound)
    if rank is None or rank > bound:
        where = f"at rank {rank}" if rank else f"not in the top {len(ids)}"
        v.fail(
            f"known item {doc_id!r} ({_title(coll, doc_id)}) expected at rank <= {bound}, "
            f"found {where}"
        )
        v.note(f"ranked: {_show_ids(ids)}")
    return v.done()


def check_known_items_reindex(
    target: SearchTarget,
    coll: Collection,
    items: Mapping[str, tuple[str, int | None]],
    settings: InvariantSettings,
) -> InvariantOutcome:
    """On an isolated clone: every known item at rank <= max_rank before a re-index is still
    there after it. Rank changes and top-k changes of the same queries are counted too."""
    cid = "known-item-stability-reindex"
    v = _Verdict(cid, "known-item-stability", "known items across a re-index of unchanged content")
    queries = [coll.queries[q] for q in sorted(items) if q in coll.queries]
    if not queries:
        return v.skip("no query of the split has a known item")
    with _clone(target) as clone:
        if clone is None:
            return v.skip(NOT_MUTABLE)
        search = _Searcher(clone, settings.profile, cache=False)
        limit = max(settings.limit, settings.known_item_max_rank)
        before = {q.id: search(q.text, limit=limit).ids for q in queries}
        clone.reindex()
        after = {q.id: search(q.text, limit=limit).ids for q in queries}
    moved = 0
    topk_changed = 0
    for q in queries:
        doc_id, declared = items[q.id]
        bound = declared or settings.known_item_max_rank
        r0, r1 = _rank(before[q.id], doc_id), _rank(after[q.id], doc_id)
        if r0 != r1:
            moved += 1
        if before[q.id][: settings.churn_k] != after[q.id][: settings.churn_k]:
            topk_changed += 1
        if r0 is not None and r0 <= bound and (r1 is None or r1 > bound):
            v.fail(
                f"{_qline(q, settings.profile)}: known item {doc_id!r} ({_title(coll, doc_id)}) "
                f"was at rank {r0} (<= {bound}) before the re-index, "
                f"{'at rank ' + str(r1) if r1 else 'absent'} after; "
                f"before: {_show_ids(before[q.id], 3)}; after: {_show_ids(after[q.id], 3)}"
            )
    v.details.update(queries=len(queries), rank_changed=moved, topk_changed=topk_changed)
    return v.done()


# ------------------------------------------------------------------------------ 2 churn


def check_paraphrase_churn(
    target: SearchTarget,
    coll: Collection,
    group: str,
    members: Sequence[Query],
    settings: InvariantSettings,
) -> InvariantOutcome:
    """Every pair of a paraphrase group: RBO(top-k, p) >= min_rbo and Jaccard@k >= min_jaccard.

    RBO is :func:`pytest_searcheval.metrics.rbo` (extrapolated) over the two top-k lists;
    Jaccard@k is :func:`pytest_searcheval.metrics.jaccard_at_k`.
    """
    from .metrics import jaccard_at_k, rbo

    cid = f"paraphrase-churn-{group}"
    k = settings.churn_k
    v = _Verdict(
        cid,
        "paraphrase-churn",
        f"paraphrase group {group} ({', '.join(q.id for q in members)}; profile "
        f"{settings.profile}): RBO(p={settings.churn_rbo_p:g}) >= {settings.churn_min_rbo:g} "
        f"and Jaccard@{k} >= {settings.churn_min_jaccard:g} expected",
    )
    search = _Searcher(target, settings.profile, cache=True)
    tops = {q.id: search(q.text, limit=max(settings.limit, k)).ids[:k] for q in members}
    pairs: list[dict[str, Any]] = []
    rbos: list[float] = []
    jaccards: list[float] = []
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            r = rbo(tops[a.id], tops[b.id], p=settings.churn_rbo_p)
            j = jaccard_at_k(tops[a.id], tops[b.id], k)
            pairs.append({"a": a.id, "b": b.id, "rbo": round(r, 6), "jaccard": round(j, 6)})
            rbos.append(r)
            jaccards.append(j)
            if r < settings.churn_min_rbo or j < settings.churn_min_jaccard:
                v.fail(f"{a.id} {a.text!r} vs {b.id} {b.text!r}: RBO {r:.4f}, Jaccard@{k} {j:.4f}")
                v.note(f"{a.id} top {k}: {_show_ids(tops[a.id], k)}")
                v.note(f"{b.id} top {k}: {_show_ids(tops[b.id], k)}")
    v.details.update(
        group=group,
        pairs=pairs,
        min_rbo=round(min(rbos), 6) if rbos else None,
        min_jaccard=round(min(jaccards), 6) if jaccards else None,
    )
    return v.done()


# ------------------------------------------------------------------------------ 3 monotonicity


def _code_of(assets: Sequence[Asset], network: object, address: object) -> str | None:
    for a in assets:
        if a.network == network and a.address == address:
            return a.code
    return None


def _matching_options(
    doc: Document, filters: Mapping[str, Any], assets: Sequence[Asset]
) -> list[Mapping[str, Any]]:
    """The payment options of ``doc`` that satisfy every option-level filter on their own."""
    from .constraints import OPTION_KEYS, violations

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
    from .constraints import NETWORKS, SCHEMES, option_price_usd

    options = [
        o
        for d in ids
        if d in coll.documents
        for o in _matching_options(coll.documents[d], filters, coll.assets)
    ]
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


TIE = 1e-9  # scores closer than this are ties: either order is consistent with them


def _tied(scores: Mapping[str, float] | None, a: str, b: str) -> bool:
    if scores is None or a not in scores or b not in scores:
        return False
    return abs(scores[a] - scores[b]) <= TIE


def inversions(
    before: Sequence[str],
    after: Sequence[str],
    before_scores: Mapping[str, float] | None = None,
    after_scores: Mapping[str, float] | None = None,
) -> list[tuple[str, str]]:
    """Pairs (a, b) present in both lists with a above b in ``before`` and below it in
    ``after``. With scores, a pair tied (within 1e-9) in either answer is not an inversion:
    the ranking function declared the two equal, so either order is consistent with it."""
    pos = {d: i for i, d in enumerate(before)}
    common = [d for d in after if d in pos]
    out = []
    for i, a in enumerate(common):
        for b in common[i + 1 :]:
            if pos[a] > pos[b] and not (_tied(before_scores, a, b) or _tied(after_scores, a, b)):
                out.append((b, a))
    return out


def check_monotonic_step(
    wider: Sequence[str],
    narrower: Sequence[str],
    limit: int,
    wider_scores: Mapping[str, float] | None = None,
    narrower_scores: Mapping[str, float] | None = None,
) -> tuple[list[str], list[tuple[str, str]]]:
    """(added results, inverted pairs) of a step from a wider filter set to a narrower one.

    With W the wider answer and N the narrower one, both cut at ``limit``: when W was not full
    (``len(W) < limit``) W holds every listing the wider filters admit, so any ``d`` in N and not
    in W was added. When W was full, a listing absent from W ranked below all of W, so in N it
    must come after every listing that N shares with W; one that outranks a shared listing (with
    a strictly higher score, when scores are given) was added above it. Inverted pairs: see
    :func:`inversions`.
    """
    in_w = set(wider)
    added = []
    full = len(wider) >= limit
    for i, d in enumerate(narrower):
        if d in in_w:
            continue
        below = [x for x in narrower[i + 1 :] if x in in_w]
        if not full or any(not _tied(narrower_scores, d, x) for x in below):
            added.append(d)
    return added, inversions(wider, narrower, wider_scores, narrower_scores)


def check_filter_monotonicity(
    target: SearchTarget, coll: Collection, query: Query, settings: InvariantSettings
) -> InvariantOutcome:
    """Chain: no filters -> labelled constraints -> + network -> + scheme -> + asset -> lower
    price ceiling (each step adds a key absent so far or halves the ceiling). Explicit filters
    only (``extract=False``), so the chain is exactly what is listed. Each step must add no
    result and invert at most ``max_inversions`` pairs (see :func:`check_monotonic_step`)."""
    cid = f"filter-monotonicity-{query.id}"
    v = _Verdict(cid, "filter-monotonicity", _qline(query, settings.profile))
    search = _Searcher(target, settings.profile, cache=True)
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
                f"tightening {wider} to {narrower} added {d!r} ({_title(coll, d)}) at rank "
                f"{_rank(answers[i], d)}: it was not among the {len(answers[i - 1])} results "
                f"of the wider filters"
                + (
                    " (that answer was full, but it now outranks listings that were in it)"
                    if len(answers[i - 1]) >= limit
                    else ""
                )
            )
        if len(inverted) > settings.max_inversions:
            shown = "; ".join(
                f"{a} (rank {_rank(answers[i - 1], a)}) above {b} (rank "
                f"{_rank(answers[i - 1], b)}) became {_rank(answers[i], a)} vs "
                f"{_rank(answers[i], b)}"
                for a, b in inverted[:5]
            )
            v.fail(
                f"tightening {wider} to {narrower} reordered {len(inverted)} pair(s) of the "
                f"remaining results (at most {settings.max_inversions} allowed): {shown}"
            )
        if added or len(inverted) > settings.max_inversions:
            v.note(f"{wider}: {_show_ids(answers[i - 1])}")
            v.note(f"{narrower}: {_show_ids(answers[i])}")
    v.details.update(query=query.id, steps=steps)
    return v.done()


# ------------------------------------------------------------------------------ 4 thresholds


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def check_threshold_compliance(
    target: SearchTarget, coll: Collection, query: Query, settings: InvariantSettings
) -> InvariantOutcome:
    """One search with the query's labelled constraints as explicit filters (extraction on):

    * at most ``limit`` results, no id twice, every id a document of the collection;
    * every result satisfies the explicit filters and the filters the response says it applied
      (:func:`pytest_searcheval.constraints.violations`, independent of the target);
    * scores non-increasing down the ranking;
    * nothing returned when the response reports a no-result decision (``meta.no_result``), a
      confidence under its threshold (``meta.confidence = {value, threshold}``), and no result
      scored under a reported ``meta.score_threshold``;
    * an unanswerable query (``expect.no_result`` or class ``no-result``) returns nothing.
    """
    from .constraints import violations

    cid = f"threshold-compliance-{query.id}"
    v = _Verdict(cid, "threshold-compliance", _qline(query, settings.profile))
    explicit = {k: val for k, val in query.constraints.items() if k in FILTER_KEYS}
    search = _Searcher(target, settings.profile, cache=True)
    response = search(query.text, limit=settings.limit, filters=explicit or None)
    ids = response.ids
    applied = {
        k: val
        for k, val in response.applied_filters.items()
        if k in FILTER_KEYS and val is not None
    }
    if len(ids) > settings.limit:
        v.fail(f"{len(ids)} results for limit {settings.limit}")
    dupes = sorted(d for d, n in Counter(ids).items() if n > 1)
    if dupes:
        v.fail(f"ids returned more than once: {', '.join(dupes)}")
    for rank, d in enumerate(ids, start=1):
        doc = coll.documents.get(d)
        if doc is None:
            v.fail(f"rank {rank}: {d!r} is not a document of the collection")
            continue
        for label, filters in (("requested", explicit), ("applied", applied)):
            if filters:
                for reason in violations(doc, filters, coll.assets):
                    v.fail(f"rank {rank}: {d} breaks the {label} filters: {reason}")
    scores = [h.score for h in response.hits]
    for rank in range(1, len(scores)):
        if scores[rank] > scores[rank - 1] + 1e-9:
            v.fail(
                f"scores increase from rank {rank} ({scores[rank - 1]:.6g}) to rank "
                f"{rank + 1} ({scores[rank]:.6g})"
            )
    meta = response.meta
    if meta.get("no_result") is True and ids:
        v.fail(f"the response reports no_result but returns {len(ids)} result(s)")
    confidence = meta.get("confidence")
    if isinstance(confidence, Mapping):
        value, tau = _number(confidence.get("value")), _number(confidence.get("threshold"))
        if value is not None and tau is not None and value < tau and ids:
            v.fail(f"confidence {value:.6g} < threshold {tau:.6g} but {len(ids)} result(s)")
    floor = _number(meta.get("score_threshold"))
    if floor is not None:
        for rank, s in enumerate(scores, start=1):
            if s < floor:
                v.fail(f"rank {rank}: score {s:.6g} < reported score_threshold {floor:.6g}")
    if _unanswerable(query) and ids:
        v.fail(f"unanswerable query returned {len(ids)} result(s); expected none")
    if v.problems:
        v.note(f"ranked: {_show_ids(ids)}")
        if explicit or applied:
            v.note(
                f"requested filters: {json.dumps(explicit, sort_keys=True)}; applied: "
                f"{json.dumps(applied, sort_keys=True, default=str)}"
            )
    v.details.update(query=query.id, returned=len(ids), unanswerable=_unanswerable(query))
    return v.done()


# ------------------------------------------------------------------------------ records


def record_of(doc: Document) -> dict[str, Any]:
    """The JSON record of a document (the body of an upsert)."""
    return _json_safe(
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
    v = _Verdict(
        cid,
        "duplicate-resistance",
        f"{_qline(query, settings.profile)}: genuine {doc_id!r} ({_title(coll, doc_id)}) "
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
    with _clone(target) as clone:
        if clone is None:
            return v.skip(NOT_MUTABLE)
        search = _Searcher(clone, settings.profile, cache=False)
        before = search(query.text, limit=limit).ids
        r0 = _rank(before, doc_id)
        if r0 is None or r0 > bound:
            return v.skip(
                f"precondition not met: {doc_id!r} is at rank {r0} before any copy is inserted "
                f"(known-item-stability-{query.id} reports it)"
            )
        for c in copies:
            clone.upsert(c)
        after = search(query.text, limit=limit).ids
    r1 = _rank(after, doc_id)
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
        copy_ranks={c: _rank(after, c) for c in sorted(copy_ids)},
    )
    if r1 is None or r1 > bound:
        v.fail(
            f"genuine {doc_id!r} expected at rank <= {bound} with the copies present, found "
            f"{'rank ' + str(r1) if r1 else 'absent'} (rank {r0} before)"
        )
    if len(in_top) > settings.duplicate_max_copies:
        v.fail(
            f"{len(in_top)} copies outrank listings of the former top {k} (at most "
            f"{settings.duplicate_max_copies}): "
            + ", ".join(f"{c} at rank {_rank(after, c)}" for c in in_top)
        )
    if v.problems:
        v.note(f"before: {_show_ids(before)}")
        v.note(f"after:  {_show_ids(after)}")
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
    what = f"its known item {doc_id!r} ({_title(coll, doc_id)})" if doc_id else "its rank-1 result"
    v = _Verdict(
        cid,
        "deletion-isolation",
        f"{_qline(subject, settings.profile)}: delete {what}, "
        f"then search {len(probes)} probe queries",
    )
    limit = settings.limit
    with _clone(target) as clone:
        if clone is None:
            return v.skip(NOT_MUTABLE)
        search = _Searcher(clone, settings.profile, cache=False)
        before = {q.id: search(q.text, limit=limit).ids for q in probes}
        if doc_id is None:
            top = before.get(subject.id) or search(subject.text, limit=limit).ids
            if not top:
                return v.skip(f"{subject.id} returned nothing to delete")
            doc_id = top[0]
            v.note(f"deleted listing: {doc_id!r} ({_title(coll, doc_id)})")
        clone.delete(doc_id)
        after = {q.id: search(q.text, limit=limit).ids for q in probes}
    held = sum(1 for q in probes if doc_id in before[q.id])
    changed = 0
    for q in probes:
        a0, a1 = before[q.id], after[q.id]
        expected = [d for d in a0 if d != doc_id]
        if doc_id in a1:
            v.fail(
                f"{q.id} {q.text!r}: deleted {doc_id!r} still returned at rank {_rank(a1, doc_id)}"
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
                f"rank {at + 1}: expected {expected[at : at + 4]}, got {a1[at : at + 4]}"
            )
            v.note(f"{q.id} before: {_show_ids(a0)}")
            v.note(f"{q.id} after:  {_show_ids(a1)}")
    v.details.update(doc=doc_id, probes=len(probes), probes_holding_it=held, changed=changed)
    return v.done()


# ------------------------------------------------------------------------------ 7 conformance


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
    with _clone(target) as clone:
        if clone is None:
            return {"skip": NOT_MUTABLE}
        removed = 0
        for doc_id in sorted(coll.documents):
            if doc_id not in conf.documents:
                clone.delete(doc_id)
                removed += 1
        for doc_id in sorted(conf.documents):
            clone.upsert(record_of(conf.documents[doc_id]))
        search = _Searcher(clone, settings.profile, cache=False)
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
    from .constraints import violations

    cid = f"filter-conformance-{case.id}"
    v = _Verdict(
        cid,
        "filter-conformance",
        f"conformance case {case.id}: query {case.query!r}, filters "
        f"{json.dumps(case.filters, sort_keys=True)} (profile {settings.profile})",
    )
    run = _shared(target, "conformance", lambda: run_conformance(target, coll, conf, settings))
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
            v.fail(f"violation: rank {rank}: {d}: {'; '.join(reasons)}")
    misses = sorted(expected - set(ids))
    for d in misses:
        v.fail(f"miss: {d} ({conf.documents[d].title}) matches the filters but was not returned")
    if oracle != expected:
        v.note(
            f"note: the oracle disagrees with expect_ids (oracle only: "
            f"{sorted(oracle - expected)}, expect_ids only: {sorted(expected - oracle)})"
        )
    if v.problems:
        v.note(f"returned: {_show_ids(ids, 20)}")
        v.note(f"expected: {', '.join(sorted(expected)) or '(none)'}")
    v.details.update(
        case=case.id,
        expected=len(expected),
        returned=len(ids),
        violations=n_violations,
        misses=len(misses),
    )
    return v.done()


# ------------------------------------------------------------------------------ 8 extraction


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
    search = _Searcher(target, settings.profile, cache=True)
    fields = {f: {"labelled": 0, "correct": 0, "wrong": 0, "missed": 0} for f in EXTRACTION_FIELDS}
    spurious: list[str] = []
    wrong: list[str] = []
    any_extracted = False
    queries = _queries(coll, settings)
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
    v = _Verdict(cid, "constraint-extraction", f"constraint extraction: {field_name}")
    counts = _shared(target, "extraction", lambda: extraction_counts(target, coll, settings))
    if not counts["any_extracted"]:
        return v.skip("the target extracted no filter from any query (no extraction to measure)")
    if field_name == "spurious":
        v.details.update(spurious=len(counts["spurious"]), queries=counts["queries"])
        if len(counts["spurious"]) > settings.extraction_max_spurious:
            v.fail(
                f"{len(counts['spurious'])} spurious filter(s) over {counts['queries']} queries "
                f"(at most {settings.extraction_max_spurious})"
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
            f"{settings.extraction_min_accuracy:g}); {row['wrong']} wrong, {row['missed']} missed"
        )
        for line in [e for e in counts["errors"] if f": {key} " in e][:20]:
            v.note(f"  {line}")
    return v.done()


# ------------------------------------------------------------------------------ cases


def _bind(
    fn: Callable[..., InvariantOutcome], *args: Any
) -> Callable[[SearchTarget], InvariantOutcome]:
    def check(target: SearchTarget) -> InvariantOutcome:
        return fn(target, *args)

    return check


def _is_x402(coll: Collection) -> bool:
    return any(d.x402 is not None for d in coll.documents.values())


def cases(collection: Collection, settings: object = None) -> list[InvariantCase]:
    """Every invariant case of ``collection`` for the configured split, in a stable order.

    ``settings``: see :func:`settings_from` (the plugin passes its ``SearchEvalConfig``).
    """
    s = settings_from(settings)
    coll = collection
    queries = _queries(coll, s)
    in_split = {q.id for q in queries}
    known = {q: item for q, item in known_items(coll).items() if q in in_split}
    out: list[InvariantCase] = []

    def add(invariant: str, subject: str, name: str, fn: Any, *args: Any) -> None:
        if invariant in s.enabled:
            out.append(InvariantCase(f"{invariant}-{subject}", invariant, name, _bind(fn, *args)))

    for qid in sorted(known):
        doc_id, max_rank = known[qid]
        add(
            "known-item-stability",
            qid,
            f"{qid}: {doc_id} at rank <= {max_rank or s.known_item_max_rank}",
            check_known_item,
            coll,
            coll.queries[qid],
            doc_id,
            s,
            max_rank,
        )
    if known:
        add(
            "known-item-stability",
            "reindex",
            f"{len(known)} known items across a re-index",
            check_known_items_reindex,
            coll,
            known,
            s,
        )
    groups: dict[str, list[Query]] = {}
    for q in queries:
        if q.group:
            groups.setdefault(q.group, []).append(q)
    for group, members in sorted(groups.items()):
        if len(members) >= 2:
            add(
                "paraphrase-churn",
                group,
                f"group {group}: {', '.join(m.id for m in members)}",
                check_paraphrase_churn,
                coll,
                group,
                members,
                s,
            )
    x402 = _is_x402(coll)
    for q in queries:
        if x402 and any(k in FILTER_KEYS for k in q.constraints):
            add(
                "filter-monotonicity",
                q.id,
                f"{q.id}: filter chain",
                check_filter_monotonicity,
                coll,
                q,
                s,
            )
    for q in queries:
        add(
            "threshold-compliance",
            q.id,
            f"{q.id}: results within filters and thresholds",
            check_threshold_compliance,
            coll,
            q,
            s,
        )
    dup_items = [(qid, known[qid][0]) for qid in sorted(known) if coll.queries[qid].source is None]
    seen: set[str] = set()
    for qid, doc_id in dup_items:
        if doc_id in seen or len(seen) >= s.duplicate_items:
            continue
        seen.add(doc_id)
        add(
            "duplicate-resistance",
            doc_id,
            f"{doc_id} for {qid} against stuffed and near-duplicate copies",
            check_duplicate_resistance,
            coll,
            coll.queries[qid],
            doc_id,
            s,
        )
    # Deletion subjects: queries with a known item first, then answerable exact-name queries,
    # then any answerable query (their rank-1 result is deleted).
    answerable = [q for q in queries if not _unanswerable(q)]
    subjects: list[tuple[Query, str | None]] = []
    used: set[str] = set()
    for qid, doc_id in dup_items:
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
            "deletion-isolation",
            subject.id,
            f"{subject.id}: delete {victim or 'its rank-1 result'}; {len(probes)} probe queries",
            check_deletion_isolation,
            coll,
            subject,
            victim,
            probes,
            s,
        )
    if "filter-conformance" in s.enabled and x402:
        out += _conformance_cases(coll, s)
    if "constraint-extraction" in s.enabled and x402:
        for name in (*EXTRACTION_FIELDS, "spurious"):
            add(
                "constraint-extraction",
                name,
                f"extraction: {name}",
                check_extraction,
                coll,
                name,
                s,
            )
    return out


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
    from .collection import load_conformance

    # Expectations are checked per case (a disagreement with the oracle is shown, not fatal).
    conf = load_conformance(path, coll.assets, check_oracle=False)
    return [
        InvariantCase(
            f"filter-conformance-{case.id}",
            "filter-conformance",
            f"{case.id}: {json.dumps(case.filters, sort_keys=True)}",
            _bind(check_conformance_case, coll, conf, case, s),
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
        name = str(rec.get("invariant") or _family(cid))
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


def _family(case_id: str) -> str:
    for name in INVARIANTS:
        if case_id.startswith(name + "-"):
            return name
    return case_id
