"""TREC run files as a target: each file is a profile named after it (``bm25.run`` ->
``bm25``), so several runs compare side by side with the paired tests and any one can be the
gated profile. Rankings follow trec_eval: score descending, ties by docid descending; the whole
list counts (no cut at ``limit``). Invariants that need a live system skip with the reason.

Each run is held as arrays (:class:`~pytest_searcheval.collection.trec.RankedRun`): a query's
answer is built from its slice when asked, and its ``Hit`` objects only if something reads them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_searcheval.targets.protocol import Hit, SearchResponse, TargetUnavailable

if TYPE_CHECKING:
    import numpy as np

    from pytest_searcheval.collection.model import Collection, Query
    from pytest_searcheval.collection.trec import RankedIds, RankedRun


def profile_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".txt", ".trec", ".run", ".tsv"):
        name = name.removesuffix(suffix)
    return name or path.name


class RunTarget:
    """Rankings read from TREC run files (validated: file:line for a malformed line, an
    unknown query, a duplicate docid in one query, a non-finite score)."""

    whole = True  # measures see the whole ranking, as trec_eval does

    def __init__(self, paths: Sequence[str | Path], collection: Collection) -> None:
        from pytest_searcheval.collection.io import Problems
        from pytest_searcheval.collection.trec import read_trec_run_ranked

        problems = Problems()
        self.runs: dict[str, RankedRun] = {}
        self.paths: dict[str, str] = {}
        for raw in paths:
            path = Path(raw)
            name = profile_name(path)
            if name in self.runs:
                problems.add(str(path), None, None, f"a second run file named {name!r}")
                continue
            if not path.is_file():
                problems.add(str(path), None, None, "no such run file")
                continue
            self.runs[name] = read_trec_run_ranked(
                path, str(path), problems, known_queries=collection.queries
            )
            self.paths[name] = str(path)
        problems.raise_if_any()

    def profiles(self) -> Mapping[str, str | None]:
        return {name: None for name in self.runs}

    def defaults(self) -> Mapping[str, Any]:
        return {"whole": True}

    def describe(self) -> Mapping[str, Any]:
        return {
            "target": "run",
            "runs": dict(self.paths),
            "sha256": {name: run.sha256 for name, run in self.runs.items()},
        }

    def search_query(self, query: Query, *, profile: str, limit: int) -> SearchResponse:
        if profile not in self.runs:
            raise TargetUnavailable(f"no run file for profile {profile!r}")
        run = self.runs[profile]
        start, stop = run.spans.get(query.id, (0, 0))
        return RankedResponse(run.ranking(query.id), run.scores[start:stop])

    def locate(
        self, profile: str, wanted: Mapping[str, Sequence[str]]
    ) -> dict[str, np.ndarray[Any, Any]]:
        """The rank of each wanted document of each query in ``profile``'s run, -1 where
        absent, all queries at once (:meth:`RankedRun.locate`): how the measures of a whole
        run are computed in one batch."""
        return self.runs[profile].locate(wanted)

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        raise TargetUnavailable(
            "a run file answers only the collection's own queries (by id); it cannot search "
            f"the text {query!r}"
        )


class RankedResponse(SearchResponse):
    """A run file's answer to one query: its ids and scores, ``hits`` made on first use (a
    ``Hit`` per result per query was a third of a 5,000-query evaluation of two runs),
    and ``ranking`` a :class:`~pytest_searcheval.collection.trec.RankedIds` that decodes only
    what is read."""

    _ids: RankedIds
    _scores: np.ndarray[Any, Any]

    def __init__(self, ids: RankedIds, scores: np.ndarray[Any, Any]) -> None:
        object.__setattr__(self, "_ids", ids)
        object.__setattr__(self, "_scores", scores)
        object.__setattr__(self, "applied_filters", {})
        object.__setattr__(self, "extracted_filters", {})
        object.__setattr__(self, "latency_ms", None)
        # distinct ids in trec_eval's order already (read_trec_run_ranked): scored as they are
        object.__setattr__(self, "meta", {"whole": True})

    @property
    def hits(self) -> tuple[Hit, ...]:
        made: tuple[Hit, ...] | None = self.__dict__.get("_hits")
        if made is None:
            made = tuple(map(Hit, self._ids, self._scores.tolist()))
            object.__setattr__(self, "_hits", made)
        return made

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    @property
    def ranking(self) -> RankedIds:
        """The ids as a lazy sequence: what the scoring reads (a slice, a length, positions)."""
        return self._ids

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)
