"""The reference engine's settings: the profiles it serves and every knob that changes a ranking."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_searcheval.engine.bm25 import BM25FParams
from pytest_searcheval.engine.dedup import DedupParams
from pytest_searcheval.engine.dense import DenseParams
from pytest_searcheval.engine.fusion import FusionParams
from pytest_searcheval.engine.threshold import NoResultRule

PROFILES: tuple[str, ...] = ("lexical", "semantic", "hybrid", "hybrid_rerank")
MAX_LIMIT = 1000


class ProfileUnavailable(RuntimeError):
    """The profile cannot serve (e.g. no cross-encoder configured); the message says why."""


def iter_profiles() -> Iterator[str]:
    yield from PROFILES


@dataclass(frozen=True)
class EngineSettings:
    """Everything that changes a ranking. Frozen; ``describe()`` reports it verbatim."""

    bm25: BM25FParams = field(default_factory=BM25FParams)
    dense: DenseParams = field(default_factory=DenseParams)
    fusion: FusionParams = field(default_factory=FusionParams)
    dedup: DedupParams = field(default_factory=DedupParams)
    #: per-profile no-result rules (an absent profile is never cut; ``{}`` disables the cut).
    #: ``None``: fit them at start on the collection's dev split (``Engine.calibrate``) when it
    #: has both no-result and answerable queries, else no cut.
    no_result: Mapping[str, NoResultRule] | None = None
    #: answerable dev queries the automatic calibration may suppress, as a share.
    max_answerable_loss: float = 0.02
    reranker_path: str | None = None
    rerank_depth: int = 30
    #: the weight of the reranker's order in the head (engine/rerank.py ``rerank_head``): 1
    #: orders the head by the model alone; below 1 keeps part of the hybrid order
    rerank_mix: float = 1.0
    model_path: str | None = None
    cache_dir: str | None = None
    embed_batch: int = 64
    #: connections of the engine's pool; a fused query holds two at once (its lexical half
    #: runs beside the dense one), and the HTTP service runs at most this many requests at a
    #: time. 4 served two hybrid queries at a time and capped 16 clients (docs/performance.md).
    pool_max: int = 8
    #: seconds a request waits for a database connection before it answers 503 (None:
    #: ``$SEARCHEVAL_DB_WAIT``, else 1 s)
    db_wait_seconds: float | None = None
    #: seconds a search's or health check's database work may wait for the server before its
    #: connection is cut and it fails (503 over HTTP): a stopped or partitioned server answers
    #: nothing and the server-side timeouts cannot fire (engine/isolation.py, db.Watchdog)
    db_query_seconds: float = 2.0
    #: measure HNSW recall@10 against exact on this many sampled queries when HNSW is built.
    recall_sample: int = 50

    def with_no_result(self, rules: Mapping[str, NoResultRule]) -> EngineSettings:
        return dataclasses.replace(self, no_result=dict(rules))

    def as_dict(self) -> dict[str, Any]:
        return {
            "bm25": {
                "k1": self.bm25.k1,
                "weights": dict(self.bm25.weights),
                "b": dict(self.bm25.b),
            },
            "dense": dataclasses.asdict(self.dense),
            "fusion": {
                "k": self.fusion.k,
                "weights": dict(self.fusion.weights),
                "prior_gamma": self.fusion.prior_gamma,
                "depth": self.fusion.depth,
                "candidate_depth": self.fusion.candidate_depth,
                "deep_candidate_depth": self.fusion.deep_candidate_depth,
                "title_weight": self.fusion.title_weight,
                "title_threshold": self.fusion.title_threshold,
                "title_depth": self.fusion.title_depth,
            },
            "dedup": dataclasses.asdict(self.dedup),
            "no_result": None
            if self.no_result is None
            else {p: dataclasses.asdict(r) for p, r in sorted(self.no_result.items())},
            "max_answerable_loss": self.max_answerable_loss,
            "reranker_path": self.reranker_path,
            "rerank_depth": self.rerank_depth,
            "rerank_mix": self.rerank_mix,
        }
