"""What one pytest process knows about the evaluation (controller or xdist worker).

The state lives in ``config.stash[STATE_KEY]``. A worker keeps the records its tests produce
(query rows, invariant records, latency results) and ships them to the controller at the end in
``workeroutput`` (:mod:`pytest_searcheval.plugin.transport`); serially they stay here. Either
way the controller merges them by key, so serial and xdist reports are identical, and nothing of
ours travels in ``user_properties`` (which ``--junitxml`` would write out).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_searcheval.evaluation import Evaluation
from pytest_searcheval.types import InvariantRecord, LatencyRecord, QueryRow


@dataclass
class EvalState(Evaluation):
    """The plugin's session: the :class:`~pytest_searcheval.evaluation.Evaluation` plus what
    pytest needs (the anchor file of the generated tests, the records kept for the report,
    what xdist workers sent, the selection)."""

    collected: bool = False
    #: Records of this process's tests (JSON text, parsed at the end), by kind.
    records: dict[str, list[str]] = field(
        default_factory=lambda: {"query": [], "invariant": [], "latency": []}
    )
    #: Controller side: merged results.
    rows: dict[str, QueryRow] = field(default_factory=dict)
    invariants: dict[str, InvariantRecord] = field(default_factory=dict)
    latency_tests: dict[str, LatencyRecord] = field(default_factory=dict)
    worker_payloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Set when any generated test was deselected (-k, -m, --lf, node ids).
    partial: bool = False
    selected: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    #: Invariant cases not collected because the target cannot run them: how many, their
    #: families and why.
    left_out: tuple[int, list[str], str] | None = None
    #: Invariant families found at run time to hold cases the target cannot run (a conftest's
    #: read-only target, run files): family -> (why, only its mutating cases?, cases left out).
    #: The first such case skips with the reason; the others are not run.
    not_run: dict[str, tuple[str, bool, int]] = field(default_factory=dict)
    rootpath: Path | None = None
    inipath: Path | None = None
    #: One marker object per kind of generated test, shared by its items (made once).
    kind_marks: dict[str, pytest.MarkDecorator] = field(default_factory=dict)

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


STATE_KEY = pytest.StashKey[EvalState]()
