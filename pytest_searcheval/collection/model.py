"""Data model of a test collection: documents, queries, graded judgments, assets, problems.

Kept apart from the loaders so that the constraint oracle can use ``Asset`` without importing
the loaders, and so that the types are importable cheaply.
"""

from __future__ import annotations

import json
import os
import zlib
from array import array
from collections.abc import ItemsView, Iterable, Iterator, Mapping, ValuesView
from dataclasses import dataclass, field
from decimal import Decimal
from typing import IO, Any

__all__ = [
    "Asset",
    "BeirDocuments",
    "Collection",
    "CollectionError",
    "Document",
    "Problem",
    "Query",
    "parse_grades",
    "title_of",
]

MAX_PROBLEMS_SHOWN = 200

#: What a grade scale is written as, for the error that refuses one.
GRADES_EXPECTED = "a grade scale: comma-separated integers and ranges, such as 0,1 or 0-3"
MAX_SCALE = 100


def parse_grades(text: str) -> list[int]:
    """A declared grade scale (``0,1``, ``0-3``, ``-1,0-2``) as its sorted grades.

    Raises ValueError saying what a scale looks like: an empty part, a non-integer, or a range
    whose end is below its start (or more than ``MAX_SCALE`` grades wide).
    """
    grades: set[int] = set()
    for part in str(text).split(","):
        item = part.strip()
        low, sep, high = item[1:].partition("-") if item else ("", "", "")
        try:
            if sep:
                start, stop = int(item[0] + low), int(high)
                if stop < start or stop - start > MAX_SCALE:
                    raise ValueError
                grades.update(range(start, stop + 1))
            else:
                grades.add(int(item))
        except ValueError:
            raise ValueError(f"expected {GRADES_EXPECTED}, got {text!r}") from None
    return sorted(grades)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input: where (file, 1-based line or None), which field, what."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        what = f" [{self.field}]" if self.field else ""
        return f"{where}{what}: {self.message}"


class CollectionError(ValueError):
    """The collection cannot be loaded; ``problems`` lists every problem found, str() shows them."""

    def __init__(self, problems: Iterable[Problem], *, truncated: int = 0) -> None:
        self.problems: list[Problem] = list(problems)
        self.truncated = truncated
        super().__init__(self._render())

    def _render(self) -> str:
        total = len(self.problems) + self.truncated
        noun = "problem" if total == 1 else "problems"
        lines = [f"{total} {noun} in the collection:"]
        lines += [f"  {p}" for p in self.problems[:MAX_PROBLEMS_SHOWN]]
        hidden = total - min(len(self.problems), MAX_PROBLEMS_SHOWN)
        if hidden > 0:
            lines.append(f"  ... and {hidden} more")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Asset:
    """A registered payment asset: ``usd`` is the USD rate of one whole unit (price snapshot)."""

    code: str
    network: str
    address: str
    decimals: int
    usd: Decimal | None = None


@dataclass(frozen=True, slots=True)
class Document:
    """A document. Generic collections use id/title/text/fields; x402 listings add ``x402``
    (the wire object) and ``sidecar`` (catalog metadata that the wire object does not expose)."""

    id: str
    title: str
    text: str
    fields: dict[str, Any] = field(default_factory=dict)
    x402: dict[str, Any] | None = None
    sidecar: dict[str, Any] = field(default_factory=dict)


class BeirDocuments(Mapping[str, Document]):
    """The documents of a BEIR ``corpus.jsonl``, held compactly: ids, titles and where each
    document's line starts (with the line's crc32); a document is parsed from its line when it
    is read, except the ones :meth:`keep` holds parsed (the judged documents). The corpus was
    validated when it was loaded; a line that no longer has the bytes it had then is an error
    (the file changed since), never another document. BEIR documents carry no x402 record and
    no sidecar."""

    __slots__ = (
        "_crcs",
        "_index",
        "_kept",
        "_lines",
        "_name",
        "_offsets",
        "_path",
        "_titles",
        "field_keys",
    )

    def __init__(self, path: str | os.PathLike[str], name: str) -> None:
        self._path = os.path.abspath(path)
        self._name = name
        self._index: dict[str, int] = {}
        self._lines = array("q")
        self._offsets = array("q")
        self._crcs = array("L")
        self._titles: list[str] = []
        self._kept: dict[str, Document] = {}
        #: every key of any document's metadata (``Document.fields``)
        self.field_keys: set[str] = set()

    def add(
        self, doc_id: str, title: str, fields: dict[str, Any], line: int, offset: int, raw: bytes
    ) -> None:
        """Record a validated document: its id, title, the keys of its metadata, and its line
        (number, start, bytes as read)."""
        if fields:
            self.field_keys.update(fields)
        self._index[doc_id] = len(self._titles)
        self._titles.append(title)
        self._lines.append(line)
        self._offsets.append(offset)
        self._crcs.append(zlib.crc32(raw))

    def keep(self, ids: Iterable[str]) -> None:
        """Hold these documents parsed (ids not in the corpus are ignored)."""
        wanted = sorted({d for d in ids if d in self._index and d not in self._kept})
        self._kept.update(zip(wanted, self.in_order(wanted), strict=True))

    def title(self, doc_id: str) -> str:
        return self._titles[self._index[doc_id]]

    def line(self, doc_id: str) -> int:
        """The 1-based line of the file that holds the document."""
        return self._lines[self._index[doc_id]]

    def in_order(self, ids: Iterable[str]) -> Iterator[Document]:
        """The documents of ``ids`` in that order, read through one open file."""
        with self._open() as fh:
            for doc_id in ids:
                kept = self._kept.get(doc_id)
                yield kept if kept is not None else self._read(fh, doc_id)

    def _read(self, fh: IO[bytes], doc_id: str) -> Document:
        i = self._index[doc_id]
        offset = self._offsets[i]
        fh.seek(offset)
        raw = fh.readline()
        if zlib.crc32(raw) != self._crcs[i]:
            raise CollectionError(
                [
                    Problem(
                        self._name,
                        self._lines[i],
                        None,
                        f"document {doc_id!r} is not the line that was loaded:"
                        " the file changed since the collection was loaded",
                    )
                ]
            )
        text = raw.decode("utf-8")
        rec = json.loads(text[1:] if offset == 0 and text.startswith("\ufeff") else text)
        return Document(doc_id, self._titles[i], rec["text"], rec.get("metadata") or {})

    def __getitem__(self, doc_id: str) -> Document:
        kept = self._kept.get(doc_id)
        if kept is not None:
            return kept
        if doc_id not in self._index:
            raise KeyError(doc_id)
        with self._open() as fh:
            return self._read(fh, doc_id)

    def _open(self) -> IO[bytes]:
        try:
            return open(self._path, "rb")
        except OSError as exc:
            raise CollectionError(
                [
                    Problem(
                        self._name,
                        None,
                        None,
                        f"cannot read a document: {exc.strerror or exc} (the file was there"
                        " when the collection was loaded)",
                    )
                ]
            ) from None

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def values(self) -> ValuesView[Document]:
        return _Values(self)

    def items(self) -> ItemsView[str, Document]:
        return _Items(self)


class _Values(ValuesView[Document]):
    """The values of a :class:`BeirDocuments`, read through one open file."""

    _mapping: BeirDocuments

    def __iter__(self) -> Iterator[Document]:
        return self._mapping.in_order(self._mapping)


class _Items(ItemsView[str, Document]):
    """The items of a :class:`BeirDocuments`, read through one open file."""

    _mapping: BeirDocuments

    def __iter__(self) -> Iterator[tuple[str, Document]]:
        return zip(self._mapping, self._mapping.in_order(self._mapping), strict=True)


def title_of(documents: Mapping[str, Document], doc_id: str) -> str:
    """A document's title, without parsing the document where the corpus holds titles apart."""
    if isinstance(documents, BeirDocuments):
        return documents.title(doc_id)
    return documents[doc_id].title


@dataclass(frozen=True, slots=True)
class Query:
    """A query. ``constraints`` uses the filter vocabulary of ``constraints.FILTER_KEYS``;
    ``expect`` may hold known_item, max_rank, must_include, no_result."""

    id: str
    text: str
    query_class: str
    split: str
    source: str | None = None
    group: str | None = None
    constraints: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)

    @property
    def unanswerable(self) -> bool:
        """Whether the right answer is no result at all: ``expect.no_result`` or the class
        ``no-result``. The one definition the query test, the invariants and the engine's
        no-result calibration share."""
        return bool(self.expect.get("no_result")) or self.query_class == "no-result"


@dataclass(slots=True)
class Collection:
    """A loaded, validated collection.

    ``judgments[qid][docid]`` holds every judged pair, inspected zeros included; a pair that
    nobody judged is absent. ``hashes`` maps corpus/queries/judgments to ``sha256:<hex>`` of a
    canonical form (see ``collection.content_hashes``).
    """

    documents: Mapping[str, Document]
    queries: dict[str, Query]
    judgments: dict[str, dict[str, int]]
    assets: list[Asset] = field(default_factory=list)
    hashes: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    root: str | None = None

    @property
    def grades(self) -> list[int]:
        return list(self.manifest.get("grades", [0, 1, 2, 3]))

    def queries_in(self, split: str = "all") -> list[Query]:
        """Queries of one split ("all" = every query), in id order."""
        if split == "all":
            return [self.queries[q] for q in sorted(self.queries)]
        known = set(self.manifest.get("splits", [])) | {q.split for q in self.queries.values()}
        if split not in known:
            raise KeyError(
                f"unknown split {split!r}: expected one of all, {', '.join(sorted(known))}"
            )
        return [self.queries[q] for q in sorted(self.queries) if self.queries[q].split == split]

    def queries_of_class(self, query_class: str) -> list[Query]:
        return [
            self.queries[q]
            for q in sorted(self.queries)
            if self.queries[q].query_class == query_class
        ]

    def qrels(self, split: str = "all") -> dict[str, dict[str, int]]:
        """Judgments restricted to the queries of a split (copies; safe to mutate)."""
        return {
            q.id: dict(self.judgments[q.id])
            for q in self.queries_in(split)
            if q.id in self.judgments
        }

    def is_judged(self, query_id: str, doc_id: str) -> bool:
        return doc_id in self.judgments.get(query_id, {})
