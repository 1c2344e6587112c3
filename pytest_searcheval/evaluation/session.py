"""One evaluation: the settings, the collection, the baseline, and what one process learned of
the target (its facts, its profiles, its answers, their latency).

Nothing here needs pytest: the plugin keeps an :class:`Evaluation` (its session state extends
it) and drives it from its hooks and items; a script or a hand-written test can drive one the
same way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_searcheval.evaluation.resolution import (
    apply_resolution,
    resolve_profiles,
    resolve_relevance,
)
from pytest_searcheval.settings import SearchEvalConfig
from pytest_searcheval.targets import (
    SearchFailed,
    SearchResponse,
    SearchTarget,
    TargetUnavailable,
)

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Query
    from pytest_searcheval.invariants.base import InvariantContext
    from pytest_searcheval.types import Baseline


def _invariant_context() -> InvariantContext:
    from pytest_searcheval.invariants.base import InvariantContext

    return InvariantContext()


@dataclass
class Evaluation:
    """The evaluation of one collection against one target.

    ``cfg`` is the run's settings; once the collection is loaded its relevance level and gain
    are resolved into it, once the target is known its profiles, gated profile and measure
    names (:meth:`describe_target`). :meth:`search` asks the target, caches the answer and
    times it; the scoring functions of :mod:`pytest_searcheval.evaluation.scoring` read it.
    """

    cfg: SearchEvalConfig
    baseline: Baseline | None = None
    baseline_error: str | None = None
    _collection: Collection | None = None
    #: The profiles, gated profile and gate-over profile once the target is known.
    resolved: dict[str, Any] | None = None
    #: profile -> reason: the profiles the target does not offer or says it cannot serve.
    unavailable: dict[str, str] = field(default_factory=dict)
    #: (query id, profile) -> the search error of that query (``{error, url, attempts}``).
    errors: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: Whether :meth:`prepare` asked the target once before the first search.
    prepared: bool = False
    #: What the invariant cases of this evaluation share (gated profile, cached answers).
    invariant_context: InvariantContext = field(default_factory=lambda: _invariant_context())
    offered: Mapping[str, str | None] | None = None
    facts: dict[str, Any] | None = None
    cache: dict[tuple[str, str], SearchResponse] = field(default_factory=dict)
    latency_ms: dict[tuple[str, str], float] = field(default_factory=dict)
    #: profile -> query id -> every measure, for a target holding all its answers (a run
    #: file): computed at first use (:func:`~pytest_searcheval.evaluation.scoring.batch_measures`).
    batched: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    #: How many ids of a run file's ranking a row keeps, once known (``(None,)``: all).
    row_depth: tuple[int | None] | None = None

    @classmethod
    def of(
        cls,
        cfg: SearchEvalConfig,
        collection: Collection,
        baseline: Baseline | None = None,
    ) -> Evaluation:
        """An evaluation of a collection already in memory (its relevance level and gain
        resolved into ``cfg`` as a loaded one's are)."""
        return cls(
            cfg=resolve_relevance(cfg, collection), baseline=baseline, _collection=collection
        )

    # --- the collection ----------------------------------------------------------------------

    @property
    def collection(self) -> Collection:
        """The collection the settings name, loaded on first use (its relevance level and
        gain resolved into ``cfg`` then)."""
        if self._collection is None:
            from pytest_searcheval.collection import load, load_trec

            cfg = self.cfg
            if cfg.qrels is not None:
                assert cfg.topics is not None
                self._collection = load_trec(
                    qrels=cfg.qrels, topics=cfg.topics, corpus=cfg.corpus, grades=cfg.grade_scale
                )
            else:
                assert cfg.collection is not None
                self._collection = load(cfg.collection, grades=cfg.grade_scale)
            self.cfg = resolve_relevance(self.cfg, self._collection)
        return self._collection

    def selected_queries(self) -> list[Query]:
        """The queries of the configured split, in the collection's order."""
        return list(self.collection.queries_in(self.cfg.split))

    # --- profiles ----------------------------------------------------------------------------

    def resolve(self, offered: Mapping[str, str | None], defaults: Mapping[str, Any]) -> None:
        """Fix the profiles, the gated profile and the gate-over profile from the settings,
        else the target's own defaults, else what it offers."""
        self.apply_resolution(resolve_profiles(self.cfg, offered, defaults))

    def apply_resolution(self, resolved: Mapping[str, Any]) -> None:
        self.resolved = dict(resolved)
        self.cfg = apply_resolution(self.cfg, resolved)

    # --- searching ---------------------------------------------------------------------------

    def describe_target(self, target: SearchTarget) -> None:
        """Read the target's facts and profiles once, and resolve the profiles against them."""
        if self.facts is not None:
            return
        try:
            self.facts = json.loads(json.dumps(dict(target.describe()), default=str))
        except Exception as exc:  # a broken describe() must not hide the measurements
            self.facts = {"describe_error": f"{type(exc).__name__}: {exc}"}
        try:
            self.offered = dict(target.profiles())
        except Exception as exc:
            self.offered = {}
            self.facts["profiles_error"] = f"{type(exc).__name__}: {exc}"
        if self.resolved is None:
            defaults = getattr(target, "defaults", None)
            self.resolve(self.offered, defaults() if callable(defaults) else {})

    def availability(self, profile: str) -> str | None:
        """Why ``profile`` cannot be asked, or ``None`` when it can."""
        if profile in self.unavailable:
            return self.unavailable[profile]
        offered = self.offered or {}
        if offered:
            if profile not in offered:
                return f"the target does not offer profile {profile!r}"
            reason = offered[profile]
            if reason is not None:
                return reason
        return None

    def prepare(self, target: SearchTarget) -> None:
        """Before the first search: read the target's facts and profiles, and ask it once
        whether it answers at all (its ``preflight()``, when it has one). Raises
        :class:`~pytest_searcheval.targets.TargetUnreachable` when it does not, so a service
        that is down is one error, not one per query."""
        if self.prepared:
            return
        self.describe_target(target)
        preflight = getattr(target, "preflight", None)
        if callable(preflight):
            preflight()
        self.prepared = True

    def search(self, target: SearchTarget, query: Query, profile: str) -> SearchResponse | None:
        """The target's answer (cached per process), or ``None``: with the profile in
        :attr:`unavailable` when the target does not serve it, or with this query's error in
        :attr:`errors` when the search failed (an exception, or an answer later than the
        timeout). A failed search is this query's error only: the next query asks again."""
        key = (query.id, profile)
        if key in self.cache:
            return self.cache[key]
        self.describe_target(target)
        reason = self.availability(profile)
        if reason is not None:
            self.unavailable[profile] = reason
            return None
        self.errors.pop(key, None)
        start = time.perf_counter()
        by_id = getattr(target, "search_query", None)
        response: SearchResponse  # search_query answers as search does (RunTarget's)
        try:
            if by_id is not None:
                response = by_id(query, profile=profile, limit=self.cfg.limit)
            else:
                response = target.search(
                    query.text, profile=profile, limit=self.cfg.limit, filters=None, extract=True
                )
        except SearchFailed as exc:
            self.errors[key] = {"error": str(exc), "url": exc.url, "attempts": exc.attempts}
            return None
        except TargetUnavailable as exc:
            # The target's own word that it cannot serve the profile (a CallableTarget's way).
            self.unavailable[profile] = str(exc) or "target unavailable"
            return None
        except Exception as exc:
            self.errors[key] = {"error": f"{type(exc).__name__}: {exc}", "url": None, "attempts": 1}
            return None
        elapsed = (time.perf_counter() - start) * 1000.0
        # A target that retried reports its answer's own time: the failed attempts and the
        # waits between them are no part of it.
        answered = response.latency_ms if response.latency_ms is not None else elapsed
        if answered > self.cfg.timeout * 1000.0:
            self.errors[key] = {
                "error": f"took {answered / 1000:.1f} s > timeout {self.cfg.timeout:g} s",
                "url": None,
                "attempts": 1,
            }
            return None
        self.cache[key] = response
        self.latency_ms[key] = elapsed
        if by_id is None:
            from pytest_searcheval.invariants.base import remember

            # The same request as a read-only invariant's (threshold compliance): answered once.
            with self.invariant_context.active():
                remember(target, response, profile=profile, text=query.text, limit=self.cfg.limit)
        return response

    def judged(self, target: SearchTarget, query: Query) -> None:
        """A query test judged the gated profile's answer to ``query``: the read-only invariant
        searching the same request (threshold compliance) may then leave that answer's
        documents, applied filters and unanswerable expectation to it. Only a test that ran in
        this process says so; an errored search left no answer to judge."""
        response = self.cache.get((query.id, self.cfg.gated))
        if response is None or getattr(target, "search_query", None) is not None:
            return
        from pytest_searcheval.invariants.base import remember

        with self.invariant_context.active():
            remember(
                target,
                response,
                profile=self.cfg.gated,
                text=query.text,
                limit=self.cfg.limit,
                judged=True,
            )

    def close(self) -> None:
        """Forget the answers and what the invariants cached: the end of the session."""
        self.cache.clear()
        self.invariant_context.clear()

    def baseline_query(self, qid: str, profile: str | None = None) -> dict[str, Any] | None:
        """The baseline's entry of query ``qid`` on ``profile`` (the gated one by default), if
        it has one."""
        if self.baseline is None:
            return None
        prof = (self.baseline.get("profiles") or {}).get(profile or self.cfg.gated)
        entry = (prof.get("queries") or {}).get(qid) if prof else None
        return entry if isinstance(entry, dict) else None

    @property
    def baseline_tag(self) -> str | None:
        """The git tag the baseline names, if any."""
        return self.baseline.get("tag") if self.baseline is not None else None
