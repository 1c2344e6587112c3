"""Shared machinery of the invariants: settings, outcomes, cases, searching, known items.

See :mod:`pytest_searcheval.invariants` for the invariants themselves."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pytest_searcheval.collection.model import Collection, Query
from pytest_searcheval.jsonsafe import json_safe
from pytest_searcheval.reasons import Reason
from pytest_searcheval.settings import setting
from pytest_searcheval.targets import (
    FilterUnsupported,
    MutableTarget,
    SearchResponse,
    SearchTarget,
    TargetUnavailable,
)

SHOWN = 8  # ranked ids shown in a failure message


# ------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class InvariantSettings:
    """Every knob of the invariants. Defaults are policy choices, not measured values.

    Each field made with :func:`~pytest_searcheval.settings.setting` is also the option
    ``--search-eval-invariant-NAME`` and the ini key ``search_eval_invariant_NAME``; the
    invariants' profile, split and limit follow the run's gated profile, split and limit.
    """

    profile: str = "hybrid"
    split: str = "all"
    limit: int = 20
    known_item_max_rank: int = setting(1, "known item must rank at or above this")
    churn_k: int = setting(10, "top-k of the paraphrase churn overlap")
    churn_rbo_p: float = setting(0.9, "RBO persistence p of the churn check")
    churn_min_rbo: float = setting(0.2, "minimum RBO between paraphrases")
    churn_min_jaccard: float = setting(0.1, "minimum Jaccard@k between paraphrases")
    chain_limit: int = setting(100, "results fetched per filter-chain step")
    max_inversions: int = setting(0, "allowed reorderings per filter-chain step")
    duplicate_items: int = setting(5, "listings copied by the duplicate check")
    duplicate_k: int = setting(10, "top-k of the duplicate check")
    duplicate_max_copies: int = setting(1, "copies allowed to outrank top-k listings")
    deletion_items: int = setting(3, "listings deleted by the deletion check")
    deletion_probes: int = setting(12, "probe queries per deletion")
    conformance_dir: str | None = setting(
        None, "filter-conformance set (default: conformance/ of the collection)"
    )
    conformance_limit: int = setting(1000, "result limit of a conformance search")
    extraction_min_accuracy: float = setting(0.9, "minimum extraction accuracy per field")
    extraction_max_spurious: int = setting(0, "allowed spurious extracted filters")
    enabled: tuple[str, ...] | None = setting(
        None, "comma-separated invariants to run (default: every registered one)"
    )

    def __post_init__(self) -> None:
        problems = []
        for name in ("limit", "known_item_max_rank", "churn_k", "chain_limit", "duplicate_k"):
            if int(getattr(self, name)) < 1:
                problems.append(f"{name}: expected an integer >= 1, got {getattr(self, name)!r}")
        if not 0.0 < self.churn_rbo_p < 1.0:
            problems.append(f"churn_rbo_p: expected a number in (0, 1), got {self.churn_rbo_p!r}")
        from pytest_searcheval.invariants.registry import names

        known = names() if self.enabled else ()
        if any(e not in known for e in self.enabled or ()):
            known = names(every_domain=True)  # a domain's family, not loaded yet
        unknown = [e for e in self.enabled or () if e not in known]
        if unknown:
            problems.append(
                f"enabled: unknown invariant(s) {', '.join(unknown)}; "
                f"expected names from {', '.join(known)}"
            )
        if problems:
            raise ValueError("invariant settings: " + "; ".join(problems))

    def runs(self, name: str) -> bool:
        return self.enabled is None or name in self.enabled


#: The profile name an invariant searches when the run's gated profile is known only once the
#: target is (a target's own default, or its first profile): resolved per process.
GATED = "@gated"


@dataclass
class InvariantContext:
    """What the invariant cases of one session share: the run's gated profile, the answers of
    targets that do not change (by target), and what a family of cases computes once (one
    clone for all conformance cases). The plugin's session holds one, makes it current while
    its tests run and clears it at the end; outside a session a context of the process serves,
    emptied by :func:`clear_caches`."""

    gated: str | None = None
    # Keyed by id(target) and holding the target itself, so the id cannot be reused while cached.
    caches: dict[int, tuple[object, dict[_RequestKey, SearchResponse]]] = field(
        default_factory=dict
    )
    shared: dict[tuple[int, str], Any] = field(default_factory=dict)
    # The cached requests whose answer a query test of this session judged
    # (remember with judged=True), keyed and holding the target as ``caches`` does.
    judged: dict[int, tuple[object, set[_RequestKey]]] = field(default_factory=dict)
    # The queries whose query test this session selected (the same set on every xdist worker,
    # so where a check lands does not depend on which worker runs which test), and those whose
    # query test's search errored in this process (that test judged no answer).
    query_tests: frozenset[str] = frozenset()
    query_errors: set[str] = field(default_factory=set)

    def clear(self) -> None:
        self.caches.clear()
        self.shared.clear()
        self.judged.clear()
        self.query_errors.clear()

    def query_test_judges(self, query_id: str) -> bool:
        """Whether the session's query test of ``query_id`` judges the answer to its own
        request (selected in this session, and its search did not error in this process)."""
        return query_id in self.query_tests and query_id not in self.query_errors

    @contextmanager
    def active(self) -> Iterator[InvariantContext]:
        """Make this the context the invariants read while the block runs."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)


_PROCESS_CONTEXT = InvariantContext()
_CURRENT: ContextVar[InvariantContext | None] = ContextVar("searcheval_invariants", default=None)


def current_context() -> InvariantContext:
    """The session's context while the plugin runs invariant tests, else the process's."""
    return _CURRENT.get() or _PROCESS_CONTEXT


def set_gated_profile(profile: str) -> None:
    """The run's gated profile, once the plugin has resolved it against the target."""
    current_context().gated = profile


def profile_of(settings: InvariantSettings) -> str:
    """The profile the invariants search: the settings' own, else the run's gated profile."""
    if settings.profile == GATED:
        return current_context().gated or "hybrid"
    return settings.profile


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
        if getattr(source, "gated_profile", "") is None:
            base["profile"] = GATED
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
    status: str  # "passed" | "failed" | "skipped" | "errored" (its search errored)
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    reasons: list[Reason] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def record(self) -> dict[str, Any]:
        """The JSON-safe row the report keeps (``id``, ``invariant``, ``passed``, ...)."""
        return json_safe(
            {
                "id": self.case_id,
                "invariant": self.invariant,
                "status": self.status,
                "passed": self.passed,
                "message": self.message,
                "details": self.details,
                "reasons": [r.as_dict() for r in self.reasons],
            }
        )


def search_errored(record: Mapping[str, Any]) -> bool:
    """Whether an invariant case's record is a search of the target that errored (it could
    not answer): an error of the run, never the invariant's verdict on the system."""
    if record.get("status") == "errored":
        return True
    return record.get("status") == "failed" and "unavailable" in (record.get("details") or {})


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
    #: The query the case is about, if one: the IDE points at its line.
    query_id: str | None = field(default=None, compare=False)
    #: Whether the check writes to an isolated copy of the target (a ``MutableTarget``): such
    #: a case cannot run on a read-only service or on run files, and is not collected where
    #: the plugin knows the target is one of those.
    mutates: bool = field(default=False, compare=False)

    def outcome(self, target: SearchTarget) -> InvariantOutcome:
        """Run the check and never raise for the invariant's own verdict."""
        try:
            return self.check(target)
        except TargetUnavailable as exc:
            # A filter the target cannot be asked for makes the case uncheckable, not failed.
            if isinstance(exc, FilterUnsupported):
                return InvariantOutcome(
                    self.id,
                    self.invariant,
                    "skipped",
                    f"{self.id}: not checkable on this target: {exc}",
                    {"unavailable": str(exc)},
                )
            # A search that errored: an error of the run, not the invariant's verdict.
            searched = getattr(exc, "searched", None)
            return InvariantOutcome(
                self.id,
                self.invariant,
                "errored",
                f"{self.id}: not judged: the target could not answer: {exc}",
                {"unavailable": str(exc)} | ({"query": searched} if searched else {}),
            )

    def run(self, target: SearchTarget) -> InvariantOutcome:
        """The outcome when the invariant holds; raise on failure; skip when not checkable."""
        __tracebackhide__ = True
        outcome = self.outcome(target)
        if outcome.status in ("failed", "errored"):
            raise InvariantFailure(outcome)
        if outcome.status == "skipped":
            try:
                import pytest
            except ModuleNotFoundError:  # pragma: no cover - pytest is a dependency
                raise InvariantSkipped(outcome.message) from None
            pytest.skip(outcome.message)
        return outcome


def bind(
    fn: Callable[..., InvariantOutcome], *args: Any
) -> Callable[[SearchTarget], InvariantOutcome]:
    """``fn(target, *args)`` as a case's check of one target."""

    def check(target: SearchTarget) -> InvariantOutcome:
        return fn(target, *args)

    return check


class Cases:
    """Builds the cases of one family with stable ids ``<invariant>-<subject>``: each call
    ``add(subject, name, fn, *args)`` adds a case whose check is ``fn(target, *args)``;
    ``add.out`` is the list a family returns."""

    def __init__(self, invariant: str) -> None:
        self.invariant = invariant
        self.out: list[InvariantCase] = []

    def __call__(
        self,
        subject: str,
        name: str,
        fn: Any,
        *args: Any,
        query_id: str | None = None,
        mutates: bool = False,
    ) -> None:
        self.out.append(
            InvariantCase(
                f"{self.invariant}-{subject}",
                self.invariant,
                name,
                bind(fn, *args),
                query_id=query_id,
                mutates=mutates,
            )
        )


class Verdict:
    """What a case's check builds while it runs: ``fail(text, code=..., subject=...)`` records
    one problem as a structured reason (the known-failure ledger compares code and subject),
    ``note(line)`` adds context to the message, ``skip(reason)`` and ``done()`` return the
    :class:`InvariantOutcome`. Public: a conftest's own invariants use it."""

    def __init__(self, case_id: str, invariant: str, headline: str) -> None:
        self.case_id = case_id
        self.invariant = invariant
        self.headline = headline
        self.problems: list[Reason] = []
        self.context: list[str] = []
        self.details: dict[str, Any] = {}

    def fail(self, text: str, *, code: str, subject: str = "", **params: Any) -> None:
        """Record one problem: ``code`` (stable, kebab-case) and ``subject`` are what the
        known-failure ledger compares; ``text`` is what a person reads."""
        self.problems.append(Reason(code, text, subject, params))

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
        lines += [f"  - {p.text}" for p in self.problems[:50]]
        if len(self.problems) > 50:
            lines.append(f"  ... and {len(self.problems) - 50} more")
        lines += self.context
        return InvariantOutcome(
            self.case_id,
            self.invariant,
            "failed",
            "\n".join(lines),
            self.details,
            reasons=list(self.problems),
        )


# ------------------------------------------------------------------------------ searching


#: (profile, text, limit, filters as sorted JSON, extract)
_RequestKey = tuple[str, str, int, str, bool]
_T = TypeVar("_T")


class Searcher:
    """Searches one target with one profile; caches answers for targets that do not change."""

    def __init__(self, target: SearchTarget, profile: str, *, cache: bool) -> None:
        self.target = target
        self.profile = profile
        self._cache: dict[_RequestKey, SearchResponse] | None = (
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
        key = _request_key(self.profile, text, limit, filters, extract)
        if self._cache is not None and key in self._cache:
            return self._cache[key]
        try:
            response = self.target.search(
                text,
                profile=self.profile,
                limit=limit,
                filters=dict(filters or {}),
                extract=extract,
            )
        except TargetUnavailable as exc:
            # Which search errored: the gate counts it with that query's own errors, once.
            exc.searched = text  # type: ignore[attr-defined]
            raise
        if self._cache is not None:
            response = self._cache[key] = lean(response)
        return response

    def judged(
        self,
        text: str,
        *,
        limit: int,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> bool:
        """Whether the cached answer to this request is one a query test of this session
        judged (:func:`remember` with ``judged``): never for a searcher that does not cache."""
        if self._cache is None:
            return False
        key = _request_key(self.profile, text, limit, filters, extract)
        return key in self._cache and key in _judged_keys(self.target)


def lean(response: SearchResponse) -> SearchResponse:
    """``response`` without the listing bodies its hits carry: what a cached answer keeps.

    The invariants read ids, scores, filters and meta, never a hit's ``resource``; a cached
    100-result answer of the Bazaar route kept about 150 KB of decoded JSON alive for the
    rest of the session, and every full collection of the cyclic GC walked all of it."""
    if not any(h.resource is not None for h in response.hits):
        return response
    return replace(response, hits=tuple(replace(h, resource=None) for h in response.hits))


def _shared_cache(target: object) -> dict[_RequestKey, SearchResponse]:
    return _of_target(current_context().caches, target, dict)


def _judged_keys(target: object) -> set[_RequestKey]:
    return _of_target(current_context().judged, target, set)


def _of_target(table: dict[int, tuple[object, _T]], target: object, make: Callable[[], _T]) -> _T:
    """``target``'s entry of ``table`` (keyed by id, holding the target itself so the id
    cannot be reused while it is there), made when missing."""
    entry = table.get(id(target))
    if entry is None or entry[0] is not target:
        entry = (target, make())
        table[id(target)] = entry
    return entry[1]


def remember(
    target: object,
    response: SearchResponse,
    *,
    profile: str,
    text: str,
    limit: int,
    filters: Mapping[str, Any] | None = None,
    extract: bool = True,
    judged: bool = False,
) -> None:
    """Offer the answer to a search made elsewhere in this process (a query test's) to the
    invariants that search ``target`` read-only with exactly the same request, so it is not
    sent twice. Only for targets whose answers the invariants cache anyway.

    ``judged``: a query test judged ``response`` (its documents, applied filters and
    unanswerable expectation). Recorded only when the answer the invariants hold for the
    request is that very answer (the same ids and applied filters), so an invariant reading it
    (:meth:`Searcher.judged`) may leave those checks to the query test; any other answer keeps
    all its checks."""
    key = _request_key(profile, text, limit, filters, extract)
    cached = _shared_cache(target).setdefault(key, lean(response))
    if judged and cached.ids == response.ids and cached.applied_filters == response.applied_filters:
        _judged_keys(target).add(key)


def _request_key(
    profile: str, text: str, limit: int, filters: Mapping[str, Any] | None, extract: bool
) -> _RequestKey:
    return (
        profile,
        text,
        limit,
        json.dumps(dict(filters or {}), sort_keys=True, default=str),
        extract,
    )


def once_per_target(target: object, key: str, compute: Callable[[], Any]) -> Any:
    """Compute once per (target, key) in this process: one clone serves a family of cases."""
    slot = (id(target), key)
    shared = current_context().shared
    entry = shared.get(slot)
    if entry is None or entry[0] is not target:
        entry = (target, compute())
        shared[slot] = entry
    return entry[1]


def clear_caches() -> None:
    """Forget the current context's cached answers (tests and long-lived processes that
    rebuild targets)."""
    current_context().clear()


@contextmanager
def isolated_clone(target: SearchTarget) -> Iterator[MutableTarget | None]:
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


def title_of(coll: Collection, doc_id: str) -> str:
    doc = coll.documents.get(doc_id)
    return doc.title if doc is not None else "(not in the collection)"


def show_ids(ids: Sequence[str], limit: int = SHOWN) -> str:
    if not ids:
        return "(no results)"
    shown = ", ".join(f"{r}:{d}" for r, d in enumerate(ids[:limit], start=1))
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


def rank_of(ids: Sequence[str], doc_id: str) -> int | None:
    try:
        return list(ids).index(doc_id) + 1
    except ValueError:
        return None


def queries_of(coll: Collection, settings: InvariantSettings) -> list[Query]:
    return list(coll.queries_in(settings.split))


def query_line(query: Query, profile: str) -> str:
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
        elif q.query_class == "exact-name" and not q.unanswerable:
            best = [d for d, g in collection.judgments.get(q.id, {}).items() if g == top]
            if len(best) == 1 and best[0] in collection.documents:
                out[q.id] = (best[0], int(max_rank) if max_rank else None)
    for q in collection.queries.values():
        if q.id not in out and q.source and q.source in out and not q.unanswerable:
            out[q.id] = out[q.source]
    return out
