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
from pytest_searcheval.targets import SearchResponse, SearchTarget, TargetUnavailable

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Query


@dataclass
class Evaluation:
    """The evaluation of one collection against one target.

    ``cfg`` is the run's settings; once the collection is loaded its relevance level and gain
    are resolved into it, once the target is known its profiles, gated profile and measure
    names (:meth:`describe_target`). :meth:`search` asks the target, caches the answer and
    times it; the scoring functions of :mod:`pytest_searcheval.evaluation.scoring` read it.
    """

    cfg: SearchEvalConfig
    baseline: dict[str, Any] | None = None
    baseline_error: str | None = None
    _collection: Collection | None = None
    #: The profiles, gated profile and gate-over profile once the target is known.
    resolved: dict[str, Any] | None = None
    #: profile -> reason; a profile that failed once is not asked again in this process.
    unavailable: dict[str, str] = field(default_factory=dict)
    offered: Mapping[str, str | None] | None = None
    facts: dict[str, Any] | None = None
    cache: dict[tuple[str, str], SearchResponse] = field(default_factory=dict)
    latency_ms: dict[tuple[str, str], float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        cfg: SearchEvalConfig,
        collection: Collection,
        baseline: dict[str, Any] | None = None,
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
                self._collection = load_trec(qrels=cfg.qrels, topics=cfg.topics, corpus=cfg.corpus)
            else:
                assert cfg.collection is not None
                self._collection = load(cfg.collection)
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

    def search(self, target: SearchTarget, query: Query, profile: str) -> SearchResponse | None:
        """The target's answer (cached per process), or ``None`` with the profile unavailable."""
        key = (query.id, profile)
        if key in self.cache:
            return self.cache[key]
        self.describe_target(target)
        reason = self.availability(profile)
        if reason is not None:
            self.unavailable[profile] = reason
            return None
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
        except TargetUnavailable as exc:
            self.unavailable[profile] = str(exc) or "target unavailable"
            return None
        except Exception as exc:
            self.unavailable[profile] = f"{type(exc).__name__}: {exc}"
            return None
        elapsed = (time.perf_counter() - start) * 1000.0
        if elapsed > self.cfg.timeout * 1000.0:
            self.unavailable[profile] = (
                f"query {query.id} took {elapsed / 1000:.1f} s > timeout {self.cfg.timeout:g} s"
            )
            return None
        self.cache[key] = response
        self.latency_ms[key] = elapsed
        if by_id is None:
            from pytest_searcheval.invariants.base import remember

            # The same request as a read-only invariant's (threshold compliance): answered once.
            remember(target, response, profile=profile, text=query.text, limit=self.cfg.limit)
        return response

    def baseline_query(self, qid: str) -> dict[str, Any] | None:
        """The baseline's entry of query ``qid`` on the gated profile, if it has one."""
        base = self.baseline or {}
        prof = (base.get("profiles") or {}).get(self.cfg.gated) or {}
        entry = (prof.get("queries") or {}).get(qid)
        return entry if isinstance(entry, dict) else None
