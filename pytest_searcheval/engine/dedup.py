"""Adversarial listings: a term-stuffing penalty and near-duplicate collapsing (hybrid only).

Neither signal reads the sidecar's ``category``, ``capability`` or ``adversarial`` labels; both
use only the listing's own text, its embedding and its operating record.

**Stuffing.** For a field ``f`` in {title, text} with analyzed tokens ``A_f`` (``index.analyze``:
stopped, stemmed) and ``|A_f| >= 4``::

    u_f(d)     = |distinct(A_f)| / |A_f|                 (1 = no term repeated)
    s(d)       = min over qualifying fields of u_f(d)    (1 when no field qualifies)
    penalty(d) = clamp((u_hi - s(d)) / (u_hi - u_lo), 0, 1),   u_hi = 0.7, u_lo = 0.4
    fused'(d)  = fused(d) * (1 - stuffing_weight * penalty(d))

On the shipped catalog every listing not labelled ``keyword-stuffing`` has ``s >= 0.75`` (no
penalty), nine of the ten labelled ones have ``s <= 0.45`` (docs/engine.md).

**Near duplicates.** Two listings ``a``, ``b`` are linked when

    cos(e_a, e_b) >= cos_min (0.83)   and   Jaccard(N_a, N_b) >= title_min (0.6)

with ``e`` the document embeddings and ``N`` the sets of name tokens of the titles
(``title.name_tokens``). Linked listings form groups (connected components). A group is shown
once, by its most established member: the largest ``(owner(d), settlements, live(d), -seq(d),
id)`` where ``owner`` is 1 when the resource host or the provider (``fields.provider``) carries
a word of the listing's own name (the original, not a mirror that relists the name from its own
domain), ``live`` is 1 live, 0.5 degraded/unknown, 0 stale, and ``seq`` is the order in which
the engine first indexed the id (an earlier listing wins a tie). In the fused list the
representative takes the best fused score of the members found, every other member is removed.
Candidate pairs come from prefix filtering on the title tokens (a Jaccard join: two sets with
Jaccard >= t share a token among the first ``|N| - ceil(t |N|) + 1`` tokens of each in a global
rare-first order; tokens in more than ``max_postings`` = 200 titles propose nothing), so the
pass never compares every pair.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_searcheval.engine import index
from pytest_searcheval.engine.fusion import LIVENESS


@dataclass(frozen=True)
class DedupParams:
    stuffing_weight: float = 0.5
    u_hi: float = 0.7
    u_lo: float = 0.4
    min_tokens: int = 4
    cos_min: float = 0.83
    title_min: float = 0.6
    #: title tokens shared by more listings than this propose no candidate pairs (bounds the
    #: pass on large catalogs; the shipped catalog's most common title token is far below it)
    max_postings: int = 200
    collapse: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.stuffing_weight <= 1.0:
            raise ValueError(
                f"DedupParams.stuffing_weight: expected 0 <= w <= 1, got {self.stuffing_weight}"
            )
        if not 0.0 <= self.u_lo < self.u_hi <= 1.0:
            raise ValueError(
                f"DedupParams: expected 0 <= u_lo < u_hi <= 1, got {self.u_lo}, {self.u_hi}"
            )


def uniqueness(text: str, min_tokens: int) -> float | None:
    tokens = index.analyze(text)
    if len(tokens) < min_tokens:
        return None
    return len(set(tokens)) / len(tokens)


def stuffing_penalty(title: str, text: str, params: DedupParams) -> float:
    """``penalty(d)`` of the module docstring, in [0, 1]."""
    values = [
        u for u in (uniqueness(title, params.min_tokens), uniqueness(text, params.min_tokens))
    ]
    present = [u for u in values if u is not None]
    s = min(present) if present else 1.0
    return min(1.0, max(0.0, (params.u_hi - s) / (params.u_hi - params.u_lo)))


def jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def owns_name(title: str, resource: str | None, provider: str | None) -> int:
    """1 when the listing's resource host or provider carries a word of its own name.

    A mirror or reseller serves someone else's name from its own domain ("Coinpulse Spot
    Mirror" at api.cachepoint.example); the original serves it from the name's own domain.
    """
    from urllib.parse import urlsplit

    from pytest_searcheval.engine.title import name_tokens

    name = set(name_tokens(title))
    words: set[str] = set()
    if resource:
        try:
            host = urlsplit(resource).hostname or ""
        except ValueError:
            host = ""
        words |= set(index.tokenize(host))
    if provider:
        words |= set(index.tokenize(provider))
    return int(bool(name & (words - {"api", "www", "example", "com", "mcp"})))


def establishment(
    sidecar: Mapping[str, object] | None, seq: int, doc_id: str, owner: int = 0
) -> tuple[int, int, float, int, str]:
    sc = sidecar or {}
    raw = sc.get("settlements")
    settlements = raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
    liveness = sc.get("liveness")
    live = LIVENESS.get(liveness, 0.5) if isinstance(liveness, str) else 0.5
    return (owner, settlements, live, -seq, doc_id)


class DuplicateGroups:
    """Near-duplicate links and each listing's representative (see the module docstring)."""

    def __init__(self) -> None:
        self.names: dict[str, set[str]] = {}
        self.links: dict[str, set[str]] = defaultdict(set)
        self.rep: dict[str, str] = {}
        #: the link sets this object made itself; the others may be shared with the groups it
        #: was copied from, which searches may be reading
        self._own: set[str] = set()

    def copy(self) -> DuplicateGroups:
        """The groups to change for the next catalog version, at the cost of the dictionaries:
        a link set is copied when :meth:`update` first changes it (``names`` are replaced,
        never changed, and ``rep`` is rebuilt by :meth:`assign`)."""
        other = DuplicateGroups()
        other.names = dict(self.names)
        other.links = defaultdict(set, self.links)
        other.rep = self.rep
        return other

    def _links_of(self, doc_id: str) -> set[str]:
        if doc_id not in self._own:
            self.links[doc_id] = set(self.links.get(doc_id, ()))
            self._own.add(doc_id)
        return self.links[doc_id]

    def _pairs(self, doc_ids: Iterable[str], params: DedupParams) -> set[tuple[str, str]]:
        """Pairs (a, b), a < b, at least one of them in ``doc_ids``, whose title Jaccard reaches
        ``title_min``; candidates by prefix filtering, checked one listing at a time."""
        freq: dict[str, int] = defaultdict(int)
        for toks in self.names.values():
            for t in toks:
                freq[t] += 1

        def prefix(toks: set[str]) -> list[str]:
            ordered = sorted(toks, key=lambda t: (freq[t], t))
            keep = len(ordered) - math.ceil(params.title_min * len(ordered)) + 1
            # A token in more than max_postings titles is too common to propose candidates.
            return [t for t in ordered[: max(keep, 1)] if freq[t] <= params.max_postings]

        by_token: dict[str, set[str]] = defaultdict(set)
        for d, toks in self.names.items():
            for t in prefix(toks):
                by_token[t].add(d)
        pairs: set[tuple[str, str]] = set()
        for d in doc_ids:
            mine = self.names.get(d, set())
            seen: set[str] = set()
            for t in prefix(mine):
                seen |= by_token[t]
            seen.discard(d)
            for other in seen:
                if jaccard(mine, self.names[other]) >= params.title_min:
                    pairs.add((min(d, other), max(d, other)))
        return pairs

    def update(
        self,
        doc_ids: Sequence[str],
        titles: Mapping[str, str],
        vectors: Callable[[Sequence[str]], Mapping[str, np.ndarray]],
        params: DedupParams,
    ) -> None:
        """(Re)link ``doc_ids`` (their titles given) against every known listing.

        ``vectors(ids)`` returns unit embeddings of the ids it knows (missing: never linked).
        Representatives are recomputed by :meth:`assign`.
        """
        from pytest_searcheval.engine.title import name_tokens

        for d in doc_ids:
            for other in self.links.pop(d, set()):
                self._links_of(other).discard(d)
            self._own.discard(d)
            self.names[d] = set(name_tokens(titles[d]))
        pairs = sorted(self._pairs(doc_ids, params))
        if not pairs:
            return
        vecs = vectors(sorted({x for p in pairs for x in p}))
        for a, b in pairs:
            va, vb = vecs.get(a), vecs.get(b)
            if va is None or vb is None:
                continue
            if float(np.dot(va, vb)) >= params.cos_min:
                self._links_of(a).add(b)
                self._links_of(b).add(a)

    def assign(self, key: Callable[[str], tuple[Any, ...]]) -> None:
        """Representative of every linked listing: the member with the largest ``key``."""
        self.rep = {}
        seen: set[str] = set()
        for start in sorted(d for d, ls in self.links.items() if ls):
            if start in seen:
                continue
            group: list[str] = []
            stack = [start]
            seen.add(start)
            while stack:
                d = stack.pop()
                group.append(d)
                for n in self.links.get(d, ()):
                    if n not in seen:
                        seen.add(n)
                        stack.append(n)
            best = max(group, key=key)
            for d in group:
                self.rep[d] = best

    def collapse(self, ranked: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
        """Each group once, as its representative with the group's best score."""
        if not self.rep:
            return list(ranked)
        best = self.collapse_scores(dict(ranked))
        return sorted(best.items(), key=lambda item: (-item[1], item[0]))

    def collapse_scores(self, scores: dict[str, float]) -> dict[str, float]:
        """:meth:`collapse` of unordered scores (``scores`` itself when no group exists)."""
        if not self.rep:
            return scores
        rep = self.rep
        best: dict[str, float] = {}
        for d, s in scores.items():
            r = rep.get(d, d)
            if s > best.get(r, -math.inf):
                best[r] = s
        return best
