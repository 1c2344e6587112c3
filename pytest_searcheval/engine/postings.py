"""BM25F over an in-memory copy of the postings: what every catalog ranks from.

The formula, statistics and result are engine/bm25.py's (the SQL statement there is the
definition, and the tests hold this module to it): the same ``N``, ``df`` (documents with the
term in any field), per-field average lengths over the documents that have the field, the
same per-posting arithmetic in the same order of operations, scores rounded as PostgreSQL
rounds ``round(x::numeric, 9)`` (15 significant digits, then half away from zero), ties broken
by doc id in code-point order (the SQL's ``COLLATE "C"``). Only the order in which a
document's fields, and a query's terms, are summed can differ from a given SQL plan
(PostgreSQL's own order is plan-dependent, which is why scores are rounded);
tests/engine/test_postings.py compares both on the shipped catalog.

Why: the SQL statement reads each posting's heap page and its field length. At 100,000
listings a query term like "api" (in the URL of 81% of them) has 81,000 postings: 250 ms
median, 650 ms p95 over the benchmark's queries; on the 525 shipped listings a lexical list to
depth 525 took 4.6 ms against 0.29 ms here (docs/performance.md). Here a term's postings are a
few numpy arrays per field and a query is a handful of vector operations over them.

Layout: every document version gets a slot; ``alive[slot]`` is False once the document was
replaced (an upsert) so its old postings drop out of ``df``, statistics and results (rows of a
tombstoned listing stay alive, as they stay in the SQL tables until ``reindex``). Each term
keeps, per field, the slots (int32) and term frequencies (float64) of its postings, plus the
sorted union of its slots over fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import numpy.typing as npt

from pytest_searcheval.engine.bm25 import BM25FParams, LexicalHit, idf
from pytest_searcheval.engine.index import FIELDS

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]

_NINE = Decimal("1e-9")


def pg_round9(value: float) -> float:
    """``round(value::numeric, 9)::float8`` as PostgreSQL computes it."""
    return float(Decimal(format(value, ".15g")).quantize(_NINE, rounding=ROUND_HALF_UP))


def pg_round9_array(values: FloatArray) -> FloatArray:
    """:func:`pg_round9` of every value: numpy's rounding where the value lies clearly between
    two multiples of 1e-9 (both round to the nearest one), :func:`pg_round9` near a half,
    where PostgreSQL's 15-digit conversion and half-away-from-zero rule decide."""
    scaled = values * 1e9
    out: FloatArray = np.rint(scaled) / 1e9
    near = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-3
    for i in np.flatnonzero(near).tolist():
        out[i] = pg_round9(float(values[i]))
    return out


class _Term:
    __slots__ = ("fields", "slots")

    def __init__(self) -> None:
        #: field -> (slots, term frequencies)
        self.fields: dict[str, tuple[IntArray, FloatArray]] = {}
        #: the sorted union of the slots over fields
        self.slots: IntArray = np.zeros(0, dtype=np.int32)


class Postings:
    """See the module docstring. Not thread-safe for writes; searches only read."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.slot_of: dict[str, int] = {}
        self.alive: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self.lengths: dict[str, FloatArray] = {f: np.zeros(0) for f in FIELDS}
        self.field_docs: dict[str, int] = dict.fromkeys(FIELDS, 0)
        self.field_total: dict[str, int] = dict.fromkeys(FIELDS, 0)
        self.terms: dict[str, _Term] = {}
        #: memo of document frequencies, cleared by every write
        self.df_cache: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.slot_of)

    def copy(self) -> Postings:
        """An independent copy (a clone's catalog writes without touching this one). The terms
        are shared: :meth:`add` replaces every term it changes with a changed copy of it, and
        the arrays are replaced, never changed in place."""
        other = Postings()
        other.ids = list(self.ids)
        other.slot_of = dict(self.slot_of)
        other.alive = self.alive.copy()
        other.lengths = {f: a.copy() for f, a in self.lengths.items()}
        other.field_docs = dict(self.field_docs)
        other.field_total = dict(self.field_total)
        other.terms = dict(self.terms)
        return other

    # -- writes ---------------------------------------------------------------------------

    def add(self, rows: Iterable[tuple[str, Mapping[str, Mapping[str, int]]]]) -> None:
        """Index ``(doc_id, {field: {term: tf}})`` rows; a known id is replaced."""
        new: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
        for doc_id, per_field in rows:
            old = self.slot_of.get(doc_id)
            if old is not None:
                self._retire(old)
            slot = len(self.ids)
            self.ids.append(doc_id)
            self.slot_of[doc_id] = slot
            self._grow(slot + 1)
            self.alive[slot] = True
            for fname, counts in per_field.items():
                length = sum(counts.values())
                self.lengths[fname][slot] = length
                self.field_docs[fname] += 1
                self.field_total[fname] += length
                for term, tf in counts.items():
                    slots, tfs = new.setdefault((term, fname), ([], []))
                    slots.append(slot)
                    tfs.append(float(tf))
        touched: set[str] = set()
        for (term, fname), (slots, tfs) in new.items():
            entry = self.terms.get(term)
            if term not in touched:
                # A fresh entry for each term this write changes: the one before it may be
                # shared with the postings it was copied from (:meth:`copy`).
                fresh = _Term()
                if entry is not None:
                    fresh.fields = dict(entry.fields)
                    fresh.slots = entry.slots
                self.terms[term] = fresh
            entry = self.terms[term]
            add_slots = np.asarray(slots, dtype=np.int32)
            add_tfs = np.asarray(tfs, dtype=np.float64)
            have = entry.fields.get(fname)
            if have is not None:
                add_slots = np.concatenate([have[0], add_slots])
                add_tfs = np.concatenate([have[1], add_tfs])
            entry.fields[fname] = (add_slots, add_tfs)
            touched.add(term)
        for term in touched:
            entry = self.terms[term]
            entry.slots = np.unique(np.concatenate([s for s, _ in entry.fields.values()]))
        self.df_cache = {}

    def _retire(self, slot: int) -> None:
        self.alive[slot] = False
        for fname, lengths in self.lengths.items():
            length = lengths[slot]
            if length > 0:
                self.field_docs[fname] -= 1
                self.field_total[fname] -= int(length)

    def _grow(self, size: int) -> None:
        if size <= len(self.alive):
            return
        capacity = max(size, 2 * len(self.alive), 1024)
        alive = np.zeros(capacity, dtype=bool)
        alive[: len(self.alive)] = self.alive
        self.alive = alive
        for fname, lengths in self.lengths.items():
            grown = np.zeros(capacity)
            grown[: len(lengths)] = lengths
            self.lengths[fname] = grown

    # -- search ---------------------------------------------------------------------------

    def document_frequency(self, term: str) -> int:
        df = self.df_cache.get(term)
        if df is None:
            entry = self.terms.get(term)
            df = 0 if entry is None else int(np.count_nonzero(self.alive[entry.slots]))
            self.df_cache[term] = df
        return df

    def search(
        self,
        query_tf: Mapping[str, int],
        params: BM25FParams,
        *,
        n_docs: int,
        limit: int,
        allowed: Any = None,
    ) -> tuple[list[LexicalHit], float]:
        """What ``bm25.search`` returns for the same catalog: the top ``limit`` documents by
        BM25F and the total idf of the query terms. ``allowed``: a container of the ids that
        may be returned (the hard filters of a single-list profile), None for every id."""
        if not query_tf or n_docs == 0:
            return [], sum(idf(n_docs, 0) for _ in query_tf)
        terms = sorted(query_tf)
        dfs = {t: self.document_frequency(t) for t in terms}
        idfs = {t: idf(n_docs, dfs[t]) for t in terms}
        total_idf = float(sum(idfs.values()))
        present = [t for t in terms if dfs[t] > 0]
        if not present:
            return [], total_idf
        fields, weights, bs = params.field_arrays()
        averages: dict[str, float] = {}
        for fname in fields:
            count = self.field_docs[fname]
            if count:
                averages[fname] = max(self.field_total[fname] / count, 1e-9)
        size = len(self.ids)
        score = np.zeros(size)
        matched = np.zeros(size)
        wtf = np.zeros(size)
        seen = np.zeros(size, dtype=bool)
        used = set(averages)
        k1 = params.k1
        any_seen = False
        for term in present:
            entry = self.terms[term]
            for fname, weight, b in zip(fields, weights, bs, strict=True):
                posting = entry.fields.get(fname)
                if posting is None or fname not in averages:
                    continue
                slots, tfs = posting
                lengths = self.lengths[fname][slots]
                wtf[slots] += weight * tfs / ((1 - b) + (b * lengths) / averages[fname])
            slots = entry.slots
            if not used.issuperset(entry.fields):
                # a field without weight: its postings score nothing, as in the SQL join
                parts = [entry.fields[f][0] for f in entry.fields if f in used]
                if not parts:
                    continue
                slots = np.unique(np.concatenate(parts))
            w = wtf[slots]
            score[slots] += float(query_tf[term]) * idfs[term] * w * (k1 + 1) / (k1 + w)
            matched[slots] += idfs[term]
            wtf[slots] = 0.0
            seen[slots] = True
            any_seen = True
        if not any_seen:
            return [], total_idf
        found = np.flatnonzero(seen & self.alive[:size])
        if allowed is not None:
            names = self.ids
            keep = np.fromiter((names[s] in allowed for s in found), dtype=bool, count=len(found))
            found = found[keep]
        if len(found) == 0:
            return [], total_idf
        raw = score[found]
        if len(found) > limit:
            # Rounding to 1e-9 can only merge scores within 1e-9 of each other: every document
            # that can make the cut after rounding lies within a margin of the limit-th score.
            kth = np.partition(raw, len(raw) - limit)[len(raw) - limit]
            keep_top = raw >= kth - 1e-8
            found, raw = found[keep_top], raw[keep_top]
        rounded = pg_round9_array(raw)
        ids = self.ids
        rows = [
            (s, ids[slot], m)
            for slot, s, m in zip(
                found.tolist(), rounded.tolist(), matched[found].tolist(), strict=True
            )
        ]
        rows.sort(key=lambda r: (-r[0], r[1]))
        hits = [LexicalHit(doc_id, s, m) for s, doc_id, m in rows[:limit]]
        return hits, total_idf
