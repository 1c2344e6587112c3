"""Title (name) match: how completely a listing's name appears in the query, typo-tolerant.

Known-item queries name a listing ("Headline Hub Search", "nimbus outlok"); BM25F and the
bi-encoder both spread that evidence over siblings that share most of the name ("Headline Hub
Archive"). This signal scores the name itself.

Tokens: ``index.tokenize`` (NFKC, casefold, accents stripped, split on non-alphanumerics) minus
``index.STOPWORDS``, not stemmed (names match as written). For a title token ``t`` and a query
token ``u``::

    sim(t, u) = 1                                   if t == u
              = 1 - osa(t, u) / max(|t|, |u|)       if both have >= 4 characters and that >= 0.75
              = 0                                   otherwise

where ``osa`` is the optimal-string-alignment distance (Levenshtein plus adjacent transposition,
so "scrpae" -> "scrape" costs 1). With ``T`` the title's token list (repeats kept) and ``Q`` the
query's::

    title_match(q, d) = sum_{t in distinct(T)} max_{u in Q} sim(t, u) / |T|

i.e. the share of the name found in the query, times the title's uniqueness
``|distinct(T)| / |T|``: a title that repeats its words (keyword stuffing, "Nimbus Outlook Nimbus
Outlook ...") cannot reach 1. A name contained in a longer query ("Cortex Chat by Cortex Relay")
scores 1. Computed in memory from a token -> documents index and a padded-trigram -> token index
of the title vocabulary (the embedded PostgreSQL ships without pg_trgm), so only tokens sharing a
trigram with a query token are compared.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from rapidfuzz.distance import OSA

from pytest_searcheval.engine import index

MIN_FUZZY_LEN = 4
MIN_SIM = 0.75


def name_tokens(text: str) -> list[str]:
    return [t for t in index.tokenize(text) if t not in index.STOPWORDS]


def osa(a: str, b: str, bound: int | None = None) -> int:
    """Optimal string alignment distance (restricted Damerau-Levenshtein), by rapidfuzz.

    With ``bound``, a distance above it is returned as ``bound + 1``.
    """
    return int(OSA.distance(a, b, score_cutoff=bound))


def sim(t: str, u: str) -> float:
    """Token similarity (see the module docstring)."""
    if t == u:
        return 1.0
    if min(len(t), len(u)) < MIN_FUZZY_LEN or abs(len(t) - len(u)) > 2:
        return 0.0
    longest = max(len(t), len(u))
    bound = int((1.0 - MIN_SIM) * longest + 1e-9)
    value = 1.0 - osa(t, u, bound) / longest
    return value if value >= MIN_SIM else 0.0


def _trigrams(token: str) -> set[str]:
    padded = f"  {token} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


class TitleIndex:
    """Title tokens of every indexed document; ``match`` scores a query against all of them."""

    def __init__(self) -> None:
        self._tokens: dict[str, list[str]] = {}
        self._postings: dict[str, set[str]] = {}
        self._grams: dict[str, set[str]] = {}
        #: the sets of ``_postings`` / ``_grams`` this index made itself: the others may be
        #: shared with the index it was copied from, which searches may be reading
        self._own_postings: set[str] = set()
        self._own_grams: set[str] = set()
        self._memo: dict[tuple[str, str], float] = {}

    def _sim(self, t: str, u: str) -> float:
        if t == u:
            return 1.0
        if min(len(t), len(u)) < MIN_FUZZY_LEN or abs(len(t) - len(u)) > 2:
            return 0.0
        key = (t, u)
        value = self._memo.get(key)
        if value is None:
            if len(self._memo) >= 100_000:
                self._memo = {}
            # the trigram bound of match(): skip the edit distance when it cannot reach MIN_SIM
            gu, gt = _trigrams(u), _trigrams(t)
            need = len(gu) - 3 * int((1 - MIN_SIM) * (len(u) + 2))
            value = sim(t, u) if len(gu & gt) >= need else 0.0
            self._memo[key] = value
        return value

    def copy(self) -> TitleIndex:
        """The index to change for the next catalog version, at the cost of its dictionaries:
        the sets stay shared until :meth:`add` or :meth:`remove` changes one, which then gets
        a copy of its own (searches keep iterating the old one undisturbed)."""
        other = TitleIndex()
        other._tokens = dict(self._tokens)
        other._postings = dict(self._postings)
        other._grams = dict(self._grams)
        other._memo = self._memo  # similarities of token pairs: true of every version
        return other

    def _posting(self, token: str) -> set[str]:
        if token not in self._own_postings:
            self._postings[token] = set(self._postings.get(token, ()))
            self._own_postings.add(token)
        return self._postings[token]

    def _gram(self, gram: str) -> set[str]:
        if gram not in self._own_grams:
            self._grams[gram] = set(self._grams.get(gram, ()))
            self._own_grams.add(gram)
        return self._grams[gram]

    def add(self, doc_id: str, title: str) -> None:
        self.remove(doc_id)
        tokens = name_tokens(title)
        self._tokens[doc_id] = tokens
        for t in set(tokens):
            self._posting(t).add(doc_id)
            for g in _trigrams(t):
                if t not in self._grams.get(g, ()):
                    self._gram(g).add(t)

    def remove(self, doc_id: str) -> None:
        # Vocabulary entries are left behind: a stale token only costs one comparison.
        for t in set(self._tokens.pop(doc_id, [])):
            self._posting(t).discard(doc_id)

    def tokens(self, doc_id: str) -> list[str]:
        return self._tokens.get(doc_id, [])

    def match_among(self, query: str, doc_ids: Iterable[str]) -> dict[str, float]:
        """``title_match(query, d)`` for the given documents only (positive scores).

        Used on large catalogs, where a query token shared by most titles would make
        :meth:`match` walk most of the catalog; the caller passes its candidate lists. Unlike
        :meth:`match`, a title token and a query token must share their first character.
        """
        q_tokens = set(name_tokens(query))
        docs = {d: self._tokens[d] for d in set(doc_ids) if self._tokens.get(d)}
        vocab = {t for tokens in docs.values() for t in tokens}
        # Fuzzy pairs must share their first character (Elasticsearch's fuzzy prefix_length 1):
        # candidate lists of a large catalog hold thousands of distinct title words.
        best = {
            t: max((self._sim(t, u) for u in q_tokens if t[0] == u[0]), default=0.0) for t in vocab
        }
        out: dict[str, float] = {}
        for d, tokens in docs.items():
            total = math.fsum(best[t] for t in set(tokens))
            if total > 0:
                out[d] = total / len(tokens)
        return out

    def match(self, query: str) -> dict[str, float]:
        """``title_match(query, d)`` for every document with a positive score."""
        q_tokens = set(name_tokens(query))
        best: dict[str, dict[str, float]] = defaultdict(dict)  # doc -> title token -> sim
        for u in q_tokens:
            similar: dict[str, float] = {}
            if u in self._postings:
                similar[u] = 1.0
            if len(u) >= MIN_FUZZY_LEN:
                grams = _trigrams(u)
                shared: dict[str, int] = defaultdict(int)
                for g in grams:
                    for t in self._grams.get(g, ()):
                        shared[t] += 1
                # One edit destroys at most 3 padded trigrams, and sim >= MIN_SIM allows at most
                # floor((1 - MIN_SIM) * (|u| + 2)) edits: tokens sharing fewer cannot match.
                need = len(grams) - 3 * int((1 - MIN_SIM) * (len(u) + 2))
                for t, n in shared.items():
                    if t != u and n >= need:
                        s = self._sim(t, u)
                        if s > 0:
                            similar[t] = s
            for t, s in similar.items():
                for d in self._postings.get(t, ()):
                    if s > best[d].get(t, 0.0):
                        best[d][t] = s
        # fsum: exact, so the score does not depend on set iteration order
        return {
            d: math.fsum(found.values()) / len(self._tokens[d])
            for d, found in best.items()
            if found
        }


def boost(score: float, threshold: float) -> float:
    """``max(0, (title_match - threshold) / (1 - threshold))``: 0 below the threshold, 1 for
    the whole name."""
    if score <= threshold:
        return 0.0
    return (score - threshold) / (1.0 - threshold) if threshold < 1.0 else 1.0
