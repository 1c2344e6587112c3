"""What one pytest process knows about the evaluation (controller or xdist worker).

The state lives in ``config.stash[STATE_KEY]``. A worker keeps the records its tests produce
(query rows, invariant records, latency results) and ships them to the controller at the end in
``workeroutput`` (:mod:`pytest_searcheval.plugin.transport`); serially they stay here. Either
way the controller merges them by key, so serial and xdist reports are identical, and nothing of
ours travels in ``user_properties`` (which ``--junitxml`` would write out).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_searcheval.settings import ConfigError, SearchEvalConfig
from pytest_searcheval.targets import SearchResponse, SearchTarget, TargetUnavailable

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Query


@dataclass
class EvalState:
    cfg: SearchEvalConfig
    baseline: dict[str, Any] | None = None
    baseline_error: str | None = None
    _collection: Collection | None = None
    collected: bool = False
    #: The profiles, gated profile and gate-over profile once the target is known.
    resolved: dict[str, Any] | None = None
    #: profile -> reason; a profile that failed once is not asked again in this process.
    unavailable: dict[str, str] = field(default_factory=dict)
    offered: Mapping[str, str | None] | None = None
    facts: dict[str, Any] | None = None
    cache: dict[tuple[str, str], SearchResponse] = field(default_factory=dict)
    latency_ms: dict[tuple[str, str], float] = field(default_factory=dict)
    #: Records of this process's tests (JSON text, parsed at the end), by kind.
    records: dict[str, list[str]] = field(
        default_factory=lambda: {"query": [], "invariant": [], "latency": []}
    )
    #: Controller side: merged results.
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    invariants: dict[str, dict[str, Any]] = field(default_factory=dict)
    latency_tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker_payloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Set when any generated test was deselected (-k, -m, --lf, node ids).
    partial: bool = False
    selected: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    rootpath: Path | None = None
    inipath: Path | None = None

    # --- the collection ----------------------------------------------------------------------

    @property
    def collection(self) -> Collection:
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

    def anchor(self) -> Path:
        """The file the generated tests belong to (their node ids start with it): the
        collection's own file when it lies under the rootdir, else the ini file that configures
        the run, so that a node id pasted back on the command line names a file pytest finds
        from the rootdir."""
        found = self._collection_file()
        outside = self.rootpath is not None and self.rootpath not in found.resolve().parents
        if outside and self.inipath is not None:
            return self.inipath
        return found

    def _collection_file(self) -> Path:
        if self.cfg.qrels is not None:
            return self.cfg.topics or self.cfg.qrels
        root = self.cfg.collection
        assert root is not None
        for name in ("collection.yaml", "qrels/queries.yaml", "queries.jsonl"):
            if (root / name).is_file():
                return root / name
        return root / "collection.yaml"

    def queries_file(self) -> Path | None:
        if self.cfg.qrels is not None:
            return self.cfg.topics
        assert self.cfg.collection is not None
        for name in ("qrels/queries.yaml", "queries.jsonl"):
            if (self.cfg.collection / name).is_file():
                return self.cfg.collection / name
        return None

    def selected_queries(self) -> list[Query]:
        return list(self.collection.queries_in(self.cfg.split))

    # --- profiles ----------------------------------------------------------------------------

    def resolve(self, offered: Mapping[str, str | None], defaults: Mapping[str, Any]) -> None:
        """Fix the profiles, the gated profile and the gate-over profile from the settings,
        else the target's own defaults, else what it offers."""
        cfg = self.cfg
        profiles = cfg.profiles or tuple(offered) or ("default",)
        gated = cfg.gated_profile or defaults.get("gated_profile") or profiles[0]
        if gated not in profiles:
            gated = profiles[0] if cfg.gated_profile is None else gated
        over = cfg.gate_over if cfg.gate_over is not None else defaults.get("gate_over")
        # A measure over a ranking cut at `limit` says so in its name (AP@20 is not AP); run
        # files are ranked whole, as trec_eval ranks them.
        depth = None if defaults.get("whole") else cfg.limit
        self.apply_resolution(
            {
                "profiles": list(profiles),
                "gated_profile": gated,
                "gate_over": over,
                "measures": [_at(m, depth) for m in cfg.measures],
                "query_measure": _at(cfg.query_measure, depth),
            }
        )

    def apply_resolution(self, resolved: Mapping[str, Any]) -> None:
        self.resolved = dict(resolved)
        self.cfg = dataclasses.replace(
            self.cfg,
            profiles=tuple(resolved["profiles"]),
            gated_profile=resolved["gated_profile"],
            gate_over=resolved.get("gate_over"),
            measures=tuple(resolved.get("measures") or self.cfg.measures),
            query_measure=resolved.get("query_measure") or self.cfg.query_measure,
        )

    # --- searching -------------------------------------------------------------------------

    def describe_target(self, target: SearchTarget) -> None:
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

    # --- records -----------------------------------------------------------------------------

    def record(self, kind: str, data: Mapping[str, Any]) -> None:
        # Kept as JSON text until the session ends: strings are invisible to the garbage
        # collector, thousands of parsed rows are not.
        self.records[kind].append(json.dumps(data, default=str, sort_keys=True))

    def merge(self, records: Mapping[str, list[str]]) -> None:
        """Parse records (this process's or a worker's) into rows, invariants and latency."""
        for raw in records.get("query", []):
            row = json.loads(raw)
            self.rows[row["qid"]] = row
        for raw in records.get("invariant", []):
            inv = json.loads(raw)
            self.invariants[inv["id"]] = inv
        for raw in records.get("latency", []):
            lat = json.loads(raw)
            self.latency_tests[lat["profile"]] = lat


def _at(measure: str, depth: int | None) -> str:
    from pytest_searcheval.metrics import with_depth

    return with_depth(measure, depth)


STATE_KEY = pytest.StashKey[EvalState]()


def resolve_relevance(cfg: SearchEvalConfig, collection: Collection) -> SearchEvalConfig:
    """The relevance level and gain of the run: set, else the collection's, else trec_eval's
    (level 1, linear gain) in trec-compat mode, else the lowest positive grade of a binary
    scale, else 2. A level at which no judged query has a relevant document is a usage error
    (every measure would be empty and the gate would judge nothing)."""
    grades = sorted({g for docs in collection.judgments.values() for g in docs.values()})
    level = cfg.relevance_level
    source = "--search-eval-relevance-level"
    if level is None:
        manifest_level = collection.manifest.get("relevance_level")
        if manifest_level is not None:
            level, source = int(manifest_level), "collection.yaml relevance_level"
        elif cfg.trec_compat:
            level, source = 1, "trec-compat default"
        else:
            positive = [g for g in (collection.manifest.get("grades") or grades) if g > 0]
            level = 1 if len(positive) <= 1 else 2
            source = "default for a binary scale" if len(positive) <= 1 else "default"
            if positive and min(positive) > level:
                level = min(positive)
    gain = cfg.gain or ("linear" if cfg.trec_compat else "exp")
    if collection.judgments and not any(
        g >= level for docs in collection.judgments.values() for g in docs.values()
    ):
        raise ConfigError(
            f"relevance level {level} ({source}): no query has a judged document of grade >= "
            f"{level}; the judgments hold grades {grades}. Set --search-eval-relevance-level "
            "(ini search_eval_relevance_level) or relevance_level in collection.yaml"
        )
    return dataclasses.replace(cfg, relevance_level=level, gain=gain)
