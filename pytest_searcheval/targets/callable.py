"""A Python function as a target: the shortest way to evaluate one's own system in-process."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from pytest_searcheval.targets.protocol import (
    Hit,
    SearchFailed,
    SearchResponse,
    TargetUnavailable,
    response_from_json,
)


def _coerce(result: Any) -> SearchResponse:
    if isinstance(result, SearchResponse):
        return result
    if isinstance(result, Mapping):
        return response_from_json(result)
    hits: list[Hit] = []
    implied = False
    for rank, item in enumerate(result):
        if isinstance(item, Hit):
            hits.append(item)
        elif isinstance(item, str):
            hits.append(Hit(id=item, score=float(-rank)))
            implied = True
        else:
            doc_id, score = item
            hits.append(Hit(id=str(doc_id), score=float(score)))
    # Ids alone rank by their order: the scores are implied, and trec-compat says so.
    return SearchResponse(hits=tuple(hits), meta={"scores": "rank"} if implied else {})


def _why(exc: Exception) -> str:
    """What was wrong with an answer: a parse error's own words, else the exception's."""
    if isinstance(exc, TargetUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class CallableTarget:
    """Wrap a Python function as a target.

    ``fn(query, *, profile, limit, filters, extract)`` returns a :class:`SearchResponse`, a JSON
    body like the reference engine's, a sequence of doc ids (best first), or of ``(id, score)``
    pairs. ``profiles``: names it serves (``None``: every configured profile is tried). Raise
    :class:`TargetUnavailable` for a profile it cannot serve; any other exception, and an answer
    of none of these shapes, is the error of that one query (:class:`SearchFailed`: the
    evaluation records it and asks the next query as usual).
    """

    def __init__(
        self,
        fn: Any,
        *,
        profiles: Iterable[str] | None = None,
        description: Mapping[str, Any] | None = None,
    ) -> None:
        self.fn = fn
        self._profiles = tuple(profiles) if profiles is not None else None
        self._description = dict(description or {})

    def profiles(self) -> Mapping[str, str | None]:
        return {p: None for p in self._profiles} if self._profiles is not None else {}

    def describe(self) -> Mapping[str, Any]:
        return {
            "target": "callable",
            "callable": getattr(self.fn, "__qualname__", repr(self.fn)),
        } | (self._description)

    def search(
        self,
        query: str,
        *,
        profile: str,
        limit: int = 20,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
    ) -> SearchResponse:
        import time

        start = time.perf_counter()
        try:
            result = self.fn(query, profile=profile, limit=limit, filters=filters, extract=extract)
        except TargetUnavailable:
            raise
        except Exception as exc:
            # The function's own failure is this search's error, in one line wherever it
            # shows (a query test, an invariant case), never a traceback of the plugin.
            raise SearchFailed(f"{type(exc).__name__}: {exc}") from exc
        elapsed = (time.perf_counter() - start) * 1000.0
        try:
            response = _coerce(result)
        except Exception as exc:
            # A malformed answer is this query's error, as the function raising is: the next
            # query may answer well, so the profile stays available.
            raise SearchFailed(f"malformed answer: {_why(exc)}") from exc
        if response.latency_ms is None:
            response = replace(response, latency_ms=elapsed)
        return response
