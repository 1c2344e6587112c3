"""TREC run files as a target: each file is a profile named after it (``bm25.run`` ->
``bm25``), so several runs compare side by side with the paired tests and any one can be the
gated profile. Rankings follow trec_eval: score descending, ties by docid descending; the whole
list counts (no cut at ``limit``). Invariants that need a live system skip with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_searcheval.targets.protocol import Hit, SearchResponse, TargetUnavailable

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Query


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
        from pytest_searcheval.collection.trec import read_trec_run

        problems = Problems()
        self.runs: dict[str, dict[str, list[tuple[str, float]]]] = {}
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
            run = read_trec_run(path, str(path), problems, known_queries=collection.queries)
            self.runs[name] = {
                qid: sorted(docs.items(), key=lambda kv: (-kv[1], _Desc(kv[0])))
                for qid, docs in run.items()
            }
            self.paths[name] = str(path)
        problems.raise_if_any()

    def profiles(self) -> Mapping[str, str | None]:
        return {name: None for name in self.runs}

    def defaults(self) -> Mapping[str, Any]:
        return {"whole": True}

    def describe(self) -> Mapping[str, Any]:
        return {"target": "run", "runs": dict(self.paths)}

    def search_query(self, query: Query, *, profile: str, limit: int) -> SearchResponse:
        if profile not in self.runs:
            raise TargetUnavailable(f"no run file for profile {profile!r}")
        ranked = self.runs[profile].get(query.id, [])
        return SearchResponse(hits=tuple(Hit(d, s) for d, s in ranked), meta={"whole": True})

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


class _Desc(str):
    """Sorts descending: trec_eval breaks score ties by docid in decreasing order."""

    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)
