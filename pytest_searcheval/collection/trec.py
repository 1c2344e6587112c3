"""BEIR and TREC readers and TREC writers.

* BEIR: ``corpus.jsonl`` ({_id, title, text, metadata}), ``queries.jsonl`` ({_id, text,
  metadata}), ``qrels/{train,dev,test}.tsv`` (``query-id  corpus-id  score``, header optional).
* TREC qrels: ``qid iter docid grade`` (whitespace separated; iter ignored).
* TREC topics: classic SGML (``<top><num> Number: 301 <title> ...``), the newer
  ``<topic number="1"><query>...`` form, or plain ``qid<TAB>text`` lines.
* TREC runs: ``qid Q0 docid rank score tag``.
* TREC corpora: ``<DOC><DOCNO>id</DOCNO> ... </DOC>`` or a JSONL file (native or BEIR records).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Collection as Collection_
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where runs are ranked: loading a collection needs none
    import numpy as np

from pytest_searcheval.collection.io import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    InputRefused,
    Problems,
    iter_jsonl,
    iter_jsonl_at,
    iter_lines,
    open_regular,
)
from pytest_searcheval.collection.model import BeirDocuments, Document

__all__ = [
    "RankedIds",
    "RankedRun",
    "read_beir_corpus",
    "read_beir_qrels",
    "read_beir_queries",
    "read_trec_corpus",
    "read_trec_qrels",
    "read_trec_run",
    "read_trec_run_ranked",
    "read_trec_topics",
    "write_trec_qrels",
    "write_trec_run",
]

Run = Mapping[str, Mapping[str, float] | Sequence[str]]


def _str_id(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def read_beir_corpus(
    path: Path, name: str, problems: Problems, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> BeirDocuments:
    """BEIR corpus.jsonl: ``_id`` (or ``id``), ``title``, ``text``, optional ``metadata``.

    Every line is parsed and checked here; what is kept is ids, titles and where each line is
    (see :class:`BeirDocuments`), not the parsed records."""
    docs = BeirDocuments(path, name)
    for line, rec, offset, raw in iter_jsonl_at(
        path, problems, name, max_line_bytes=max_line_bytes
    ):
        did = _str_id(rec.get("_id", rec.get("id")))
        if did is None:
            problems.add(name, line, "_id", "expected a non-empty string id")
            continue
        title, text = rec.get("title", ""), rec.get("text")
        if title is None:
            title = ""
        if not isinstance(title, str):
            problems.add(name, line, "title", "expected a string")
            continue
        if not isinstance(text, str):
            problems.add(name, line, "text", "expected a string")
            continue
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            problems.add(name, line, "metadata", "expected an object")
            continue
        if did in docs:
            problems.add(
                name, line, "_id", f"duplicate document id {did!r} (first on line {docs.line(did)})"
            )
            continue
        docs.add(did, title, meta, line, offset, raw)
    return docs


def read_beir_queries(
    path: Path, name: str, problems: Problems, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> dict[str, tuple[str, dict[str, Any], int]]:
    """BEIR queries.jsonl -> {qid: (text, metadata, line)}."""
    out: dict[str, tuple[str, dict[str, Any], int]] = {}
    for line, rec in iter_jsonl(path, problems, name, max_line_bytes=max_line_bytes):
        qid = _str_id(rec.get("_id", rec.get("id")))
        if qid is None:
            problems.add(name, line, "_id", "expected a non-empty string id")
            continue
        text = rec.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.add(name, line, "text", "query without text: expected a non-empty string")
            continue
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            problems.add(name, line, "metadata", "expected an object")
            continue
        if qid in out:
            problems.add(
                name, line, "_id", f"duplicate query id {qid!r} (first on line {out[qid][2]})"
            )
            continue
        out[qid] = (text, meta, line)
    return out


def _grade(text: str, name: str, line: int, problems: Problems) -> int | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if value.is_integer():
        return int(value)
    problems.add(name, line, "grade", f"expected an integer grade, got {text!r}")
    return None


def _add_judgment(
    out: dict[str, dict[str, int]],
    where: dict[tuple[str, str], int],
    qid: str,
    did: str,
    grade: int,
    name: str,
    line: int,
    problems: Problems,
    grades: Sequence[int] | None,
) -> None:
    if grades is not None and grade not in grades:
        scale = ", ".join(map(str, grades))
        problems.add(name, line, "grade", f"grade {grade} outside the declared scale {scale}")
        return
    if (qid, did) in where:
        problems.add(
            name, line, None, f"duplicate judgment {qid} {did} (first on line {where[qid, did]})"
        )
        return
    where[qid, did] = line
    out.setdefault(qid, {})[did] = grade


#: The third field of a BEIR qrels header line.
_BEIR_HEADER = ("score", "grade", "relevance")

#: One qrels line as (query id, document id, grade text); a string says what was expected;
#: ``None`` skips the line (a header).
Row = Callable[[str, int], tuple[str, str, str] | str | None]


def _beir_row(text: str, line: int) -> tuple[str, str, str] | str | None:
    parts = text.split("\t")
    if len(parts) != 3:
        return f"expected 3 tab-separated fields, got {len(parts)}"
    if line == 1 and parts[2].strip() in _BEIR_HEADER:
        return None
    return parts[0].strip(), parts[1].strip(), parts[2].strip()


def _trec_row(text: str, line: int) -> tuple[str, str, str] | str | None:
    parts = text.split()
    if len(parts) != 4:
        return f"expected 'qid iter docid grade' (4 fields), got {len(parts)}"
    return parts[0], parts[2], parts[3]


def _read_qrels(
    path: Path,
    name: str,
    problems: Problems,
    grades: Sequence[int] | None,
    max_line_bytes: int,
    row: Row,
) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
    """Judgments ``{qid: {docid: grade}}`` and the line of each pair, from a qrels file whose
    lines ``row`` splits; blank lines are skipped, every problem is added with its line."""
    out: dict[str, dict[str, int]] = {}
    where: dict[tuple[str, str], int] = {}
    for line, text in iter_lines(path, problems, name, max_line_bytes=max_line_bytes):
        if not text.strip():
            continue
        fields = row(text, line)
        if fields is None:
            continue
        if isinstance(fields, str):
            problems.add(name, line, None, fields)
            continue
        qid, did, grade = fields
        g = _grade(grade, name, line, problems)
        if g is None:
            continue
        if not qid or not did:
            problems.add(name, line, None, "empty query or document id")
            continue
        _add_judgment(out, where, qid, did, g, name, line, problems, grades)
    return out, where


def read_beir_qrels(
    path: Path,
    name: str,
    problems: Problems,
    grades: Sequence[int] | None = None,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
    """BEIR qrels TSV: ``query-id<TAB>corpus-id<TAB>score``; the header line is optional."""
    return _read_qrels(path, name, problems, grades, max_line_bytes, _beir_row)


def read_trec_qrels(
    path: Path,
    name: str,
    problems: Problems,
    grades: Sequence[int] | None = None,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
    """TREC qrels: ``qid iter docid grade``, whitespace separated (trec_eval's format)."""
    return _read_qrels(path, name, problems, grades, max_line_bytes, _trec_row)


_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_NUM = re.compile(r"<num>\s*(?:Number:)?\s*(\S+)", re.I)
_FIELD = {
    "title": re.compile(r"<title>\s*(?:Topic:)?(.*?)(?=<\w+>|</top>|$)", re.S | re.I),
    "desc": re.compile(r"<desc>\s*(?:Description:)?(.*?)(?=<\w+>|</top>|$)", re.S | re.I),
    "narr": re.compile(r"<narr>\s*(?:Narrative:)?(.*?)(?=<\w+>|</top>|$)", re.S | re.I),
}
_TOPIC = re.compile(r"<topic\s+[^>]*number=\"([^\"]+)\"[^>]*>(.*?)</topic>", re.S | re.I)
_XML_FIELD = {
    "title": re.compile(r"<(?:query|title)>(.*?)</(?:query|title)>", re.S | re.I),
    "desc": re.compile(r"<(?:question|description)>(.*?)</(?:question|description)>", re.S | re.I),
    "narr": re.compile(r"<narrative>(.*?)</narrative>", re.S | re.I),
}


def _clean(text: str) -> str:
    return " ".join(re.sub(r"</?\w+[^>]*>", " ", text).split())


def read_trec_topics(
    path: Path,
    name: str,
    problems: Problems,
    *,
    field: str = "title",
    max_bytes: int = 256 * 1024 * 1024,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> dict[str, tuple[str, int]]:
    """Topics -> {qid: (text, line)}. ``field`` picks title, desc, narr or "title+desc"."""
    wanted = field.split("+")
    if any(w not in _FIELD for w in wanted):
        problems.add(
            name,
            None,
            "field",
            f"unknown topic field {field!r}: expected title, desc, narr, title+desc",
        )
        return {}
    out: dict[str, tuple[str, int]] = {}
    try:
        fh, _ = open_regular(path, max(max_bytes, DEFAULT_MAX_FILE_BYTES))
        with fh:
            head = fh.read(65536)
    except InputRefused as exc:
        problems.add(name, None, None, str(exc))
        return {}
    except OSError as exc:
        problems.add(name, None, None, f"cannot open: {exc.strerror or exc}")
        return {}
    lowered = head.lower()
    if b"<top>" not in lowered and b"<topic" not in lowered:
        for line, text in iter_lines(path, problems, name, max_line_bytes=max_line_bytes):
            if not text.strip():
                continue
            qid, sep, body = text.partition("\t")
            if not sep or not qid.strip() or not body.strip():
                problems.add(name, line, None, "expected 'qid<TAB>text' (or <top> SGML topics)")
                continue
            _put_topic(out, qid.strip(), body.strip(), line, name, problems)
        return out
    try:
        fh, _ = open_regular(path, max_bytes)
        with fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        problems.add(name, None, None, f"topic file {exc}")
        return {}
    if len(data) > max_bytes:
        problems.add(name, None, None, f"topic file is larger than {max_bytes} bytes")
        return {}
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError:
        content = data.decode("latin-1")  # classic TREC topic files predate UTF-8
    sgml = [(m.start(), m.group(1)) for m in _TOP.finditer(content)]
    xml = [(m.start(), m.group(2), m.group(1), _XML_FIELD) for m in _TOPIC.finditer(content)]
    for start, body in sgml:
        line = content.count("\n", 0, start) + 1
        m = _NUM.search(body)
        if m is None:
            problems.add(name, line, "num", "topic without <num>")
            continue
        text = _join(body, wanted, _FIELD)
        _put_topic(out, m.group(1).strip(), text, line, name, problems)
    for start, body, qid, fields in xml:
        line = content.count("\n", 0, start) + 1
        text = _join(body, wanted, fields)
        _put_topic(out, qid.strip(), text, line, name, problems)
    if not sgml and not xml:
        problems.add(name, 1, None, "no <top> or <topic> elements found")
    return out


def _join(body: str, wanted: list[str], fields: Mapping[str, re.Pattern[str]]) -> str:
    parts = []
    for w in wanted:
        m = fields[w].search(body)
        if m is not None:
            parts.append(_clean(m.group(1)))
    return " ".join(p for p in parts if p)


def _put_topic(
    out: dict[str, tuple[str, int]], qid: str, text: str, line: int, name: str, problems: Problems
) -> None:
    if not text:
        problems.add(name, line, "text", f"topic {qid} without text in the chosen field")
    elif qid in out:
        problems.add(name, line, "num", f"duplicate topic {qid!r} (first on line {out[qid][1]})")
    else:
        out[qid] = (text, line)


def read_trec_corpus(
    path: Path, name: str, problems: Problems, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> tuple[dict[str, Document], dict[str, dict[str, Any]]]:
    """A TREC SGML corpus (``<DOC><DOCNO>..</DOCNO>..</DOC>``), streamed document by document."""
    docs: dict[str, Document] = {}
    raw: dict[str, dict[str, Any]] = {}
    first: dict[str, int] = {}
    for line, docno, title, text in _iter_sgml_docs(path, name, problems, max_line_bytes):
        if not docno:
            problems.add(name, line, "DOCNO", "document without <DOCNO>")
            continue
        if docno in first:
            problems.add(
                name, line, "DOCNO", f"duplicate document {docno!r} (first on line {first[docno]})"
            )
            continue
        first[docno] = line
        docs[docno] = Document(docno, title, text)
        raw[docno] = {"id": docno, "title": title, "text": text}
    return docs, raw


def _iter_sgml_docs(
    path: Path, name: str, problems: Problems, max_line_bytes: int
) -> Iterator[tuple[int, str, str, str]]:
    buf: list[str] = []
    start = 0
    inside = False
    for line, text in iter_lines(path, problems, name, max_line_bytes=max_line_bytes):
        upper = text.strip().upper()
        if upper.startswith("<DOC>"):
            inside, buf, start = True, [text.strip()[5:]], line
            continue
        if inside and upper.startswith("</DOC>"):
            inside = False
            body = "\n".join(buf)
            m = re.search(r"<DOCNO>\s*(.*?)\s*</DOCNO>", body, re.S | re.I)
            docno = m.group(1) if m else ""
            if m:
                body = body[: m.start()] + body[m.end() :]
            t = re.search(
                r"<(?:TITLE|HEADLINE|HEAD)>(.*?)</(?:TITLE|HEADLINE|HEAD)>", body, re.S | re.I
            )
            title = _clean(t.group(1)) if t else ""
            if t:
                body = body[: t.start()] + body[t.end() :]
            yield start, docno, title, _clean(body)
            continue
        if inside:
            buf.append(text)
    if inside:
        problems.add(name, start, None, "<DOC> not closed by </DOC>")


def read_trec_run(
    path: Path,
    name: str,
    problems: Problems,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    known_queries: Collection_[str] | None = None,
) -> dict[str, dict[str, float]]:
    """TREC run: ``qid Q0 docid rank score tag`` -> {qid: {docid: score}}. With
    ``known_queries``, a query the collection does not have is a problem at its first line."""
    run: dict[str, dict[str, float]] = {}
    unknown: set[str] = set()
    for line, text in iter_lines(path, problems, name, max_line_bytes=max_line_bytes):
        parts = text.split()
        if not parts:
            continue
        if len(parts) != 6:
            problems.add(
                name,
                line,
                None,
                f"expected 'qid Q0 docid rank score tag' (6 fields), got {len(parts)}",
            )
            continue
        qid, _, did, rank, score, _tag = parts
        try:
            int(rank)
        except ValueError:
            problems.add(name, line, "rank", f"expected an integer rank, got {rank!r}")
            continue
        try:
            value = float(score)
        except ValueError:
            problems.add(name, line, "score", f"expected a number, got {score!r}")
            continue
        if not math.isfinite(value):
            problems.add(name, line, "score", f"expected a finite number, got {score!r}")
            continue
        if known_queries is not None and qid not in known_queries:
            if qid not in unknown:
                unknown.add(qid)
                problems.add(name, line, "qid", f"query {qid!r} is not a query of the collection")
            continue
        docs = run.setdefault(qid, {})
        if did in docs:
            problems.add(name, line, "docid", f"document {did!r} appears twice for query {qid!r}")
            continue
        docs[did] = value
    return run


@dataclass(frozen=True)
class RankedRun:
    """A run file in trec_eval's order, as arrays: query ``q`` ranks ``docs[start:stop]`` for
    ``(start, stop) = spans[q]``, score descending, ties by docid descending. Doc ids are the
    file's UTF-8 bytes (one fixed-width array, not a string object per line)."""

    spans: dict[str, tuple[int, int]]
    docs: np.ndarray[Any, np.dtype[np.bytes_]]
    scores: np.ndarray[Any, np.dtype[np.float64]]
    ascii: bool = True
    #: SHA-256 of the file's bytes, so a report names the exact run it measured.
    sha256: str = ""
    #: Ids of up to 8 bytes as one integer each (:func:`_doc_words`), when the ranking made
    #: them already; else made on first use.
    keys: np.ndarray[Any, Any] | None = dataclasses.field(default=None, repr=False, compare=False)

    def ids(self, qid: str) -> list[str]:
        return list(self.ranking(qid))

    def ranking(self, qid: str) -> RankedIds:
        """Query ``qid``'s ranking as a sequence of ids, made into strings only where read."""
        start, stop = self.spans.get(qid, (0, 0))
        keys = self._keys
        return RankedIds(
            self.docs[start:stop], self.ascii, None if keys is None else keys[start:stop]
        )

    @functools.cached_property
    def _keys(self) -> np.ndarray[Any, Any] | None:
        """Ids of up to 8 bytes as one integer each (equal ids, equal integers): finding 12
        judged documents among 1,000 compares integers, not byte strings."""
        if self.keys is not None:
            return self.keys
        if self.docs.dtype.itemsize > 8:
            return None
        return _doc_words(self.docs)[:, 0]

    def __len__(self) -> int:
        return len(self.docs)

    def locate(
        self, wanted: Mapping[str, Sequence[str]]
    ) -> dict[str, np.ndarray[Any, np.dtype[np.int64]]]:
        """:meth:`RankedIds.positions` of many queries at once: for each query, the 0-based
        rank of each of its documents, -1 where absent. When every query holds as many ids
        (of up to 8 bytes) the rankings are one grid and all queries are compared at once."""
        import numpy as np

        keys = self._keys
        spans = list(self.spans.values())
        depth = len(self.docs) // len(spans) if spans else 0
        regular = keys is not None and depth > 0
        regular = regular and all(
            a == i * depth and b == a + depth for i, (a, b) in enumerate(spans)
        )
        if not regular or not wanted:
            return {q: self.ranking(q).positions(docs) for q, docs in wanted.items()}
        assert keys is not None
        width = self.docs.dtype.itemsize
        queries = list(wanted)
        counts = np.fromiter((len(wanted[q]) for q in queries), dtype=np.int64, count=len(queries))
        offsets = np.concatenate(([0], np.cumsum(counts)))
        # an id that cannot be held (too long, ending in NUL) becomes b"": key 0, which no
        # held id has (no id is empty)
        flat = [
            d if len(d) <= width and not d.endswith(b"\0") else b""
            for q in queries
            for d in (x.encode("utf-8") for x in wanted[q])
        ]
        found = np.full(len(flat), -1, dtype=np.int64)
        if flat:
            grid = keys.reshape(-1, depth)
            want = np.zeros((len(queries), int(counts.max())), dtype=np.uint64)
            rows_of = np.repeat(np.arange(len(queries)), counts)
            cols_of = np.arange(len(flat)) - offsets[rows_of]
            want[rows_of, cols_of] = _doc_words(np.array(flat, dtype=self.docs.dtype))[:, 0]
            held = np.array([self.spans.get(q, (-1, -1))[0] for q in queries], dtype=np.int64)
            row = np.where(held >= 0, held // depth, 0)
            # queries the run does not hold compare against no key (0 matches nothing held)
            want[held < 0] = 0
            step = max(1, 20_000_000 // (depth * want.shape[1]))
            for lo in range(0, len(queries), step):
                part = grid[row[lo : lo + step]]
                q, rank, j = np.nonzero(part[:, :, None] == want[lo : lo + step, None, :])
                found[offsets[lo + q] + j] = rank
        return {q: found[offsets[i] : offsets[i + 1]] for i, q in enumerate(queries)}


class RankedIds(Sequence[str]):
    """One query's ranked doc ids over a slice of a :class:`RankedRun` (distinct, in
    trec_eval's order). ``ids[:10]`` decodes ten ids, not the thousand a run file holds;
    :meth:`positions` finds documents by their bytes, which is how the measures of every query
    of a run are computed at once (:func:`pytest_searcheval.metrics.evaluate` asks it)."""

    __slots__ = ("_ascii", "_docs", "_keys")

    def __init__(
        self, docs: np.ndarray[Any, Any], ascii: bool, keys: np.ndarray[Any, Any] | None = None
    ) -> None:
        self._docs = docs
        self._ascii = ascii
        self._keys = keys

    def __len__(self) -> int:
        return len(self._docs)

    def _decode(self, chunk: np.ndarray[Any, Any]) -> list[str]:
        import numpy as np

        if self._ascii:
            return chunk.astype(np.str_).tolist()  # type: ignore[no-any-return]
        return [d.decode("utf-8") for d in chunk.tolist()]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return self._decode(self._docs[index])
        return bytes(self._docs[index]).decode("utf-8")  # IndexError as a list's

    def __iter__(self) -> Iterator[str]:
        return iter(self._decode(self._docs))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RankedIds | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RankedIds({list(self)!r})"

    def positions(self, docs: Sequence[str]) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The 0-based rank of each of ``docs`` in this ranking, -1 where it is absent."""
        import numpy as np

        out = np.full(len(docs), -1, dtype=np.int64)
        if not len(docs) or not self._docs.size:
            return out
        width = self._docs.dtype.itemsize
        wanted = [d.encode("utf-8") for d in docs]
        # An id longer than the array's width (or ending in NUL, which a bytes array drops)
        # cannot be one of its entries: left out, not truncated into a false match.
        fits = [i for i, d in enumerate(wanted) if len(d) <= width and not d.endswith(b"\0")]
        if not fits:
            return out
        keys = np.array([wanted[i] for i in fits], dtype=self._docs.dtype)
        if self._keys is not None:
            rank, col = np.nonzero(self._keys[:, None] == _doc_words(keys)[None, :, 0])
        else:
            rank, col = np.nonzero(self._docs[:, None] == keys[None, :])
        out[np.asarray(fits, dtype=np.int64)[col]] = rank
        return out


#: Bytes read at a time by the fast path (whole lines): bounds the tokens alive at once.
_CHUNK = 8 * 1024 * 1024


def read_trec_run_ranked(
    path: Path,
    name: str,
    problems: Problems,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    known_queries: Collection_[str] | None = None,
) -> RankedRun:
    """A run file ranked as trec_eval ranks it, read in one pass into arrays.

    Well-formed ASCII files take a vectorised path (every line checked for six fields, an
    integer rank, a finite score; each query's documents distinct). Any file that path does not
    accept exactly is read again by :func:`read_trec_run`, which reports each problem with its
    line and field, so both paths refuse the same files with the same messages."""
    digest = hashlib.sha256()
    fast = _ranked_fast(path, max_line_bytes, digest)
    if fast is not None and (known_queries is None or all(q in known_queries for q in fast.spans)):
        return dataclasses.replace(fast, sha256=digest.hexdigest())
    run = read_trec_run(
        path, name, problems, max_line_bytes=max_line_bytes, known_queries=known_queries
    )
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(block)
    except OSError:
        pass  # read_trec_run has reported why the file cannot be read
    return dataclasses.replace(_ranked_from_mapping(run), sha256=digest.hexdigest())


def _ranked_fast(path: Path, max_line_bytes: int, digest: Any) -> RankedRun | None:
    """The vectorised reader; ``None`` for anything it does not accept exactly."""
    import numpy as np

    try:
        fh, _ = open_regular(path, DEFAULT_MAX_FILE_BYTES)
    except (InputRefused, OSError):
        return None
    qids: list[np.ndarray[Any, Any]] = []
    docs: list[np.ndarray[Any, Any]] = []
    scores: list[np.ndarray[Any, Any]] = []
    with fh:
        rest = b""
        while True:
            try:
                block = fh.read(_CHUNK)
            except OSError:
                return None
            digest.update(block)
            data = rest + block
            if block:
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
                if not data:
                    if len(rest) > max_line_bytes:
                        return None
                    continue
            elif not data:
                break
            else:
                rest = b""
            columns = _columns(data, max_line_bytes)
            if columns is None:
                return None
            qids.append(columns[0])
            docs.append(columns[1])
            scores.append(columns[2])
            if not block:
                break
    if not qids:
        return RankedRun({}, np.array([], dtype="S1"), np.array([], dtype=np.float64))
    return _rank(np.concatenate(qids), np.concatenate(docs), np.concatenate(scores), True)


def _columns(
    data: bytes, max_line_bytes: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """(qids, docids, scores) of whole lines of ASCII text, or ``None``."""
    import numpy as np

    raw = np.frombuffer(data, dtype=np.uint8)
    simple = _columns_simple(raw, max_line_bytes)
    if simple is not None:
        return simple
    newline = raw == 10
    space = (raw == 32) | (raw == 9) | (raw == 13) | newline
    # Other control bytes (split() counts some as whitespace) and non-ASCII: the exact reader.
    if bool(((raw < 32) & ~space).any()) or bool((raw >= 128).any()):
        return None
    ends = np.flatnonzero(newline)
    if len(data) and data[-1:] != b"\n":
        ends = np.append(ends, len(data) - 1)
    if ends.size and int(np.diff(ends, prepend=-1).max()) > max_line_bytes + 1:
        return None
    starts = ~space
    starts[1:] &= space[:-1]
    per_line = np.diff(np.cumsum(starts, dtype=np.int64)[ends], prepend=0)
    if not bool(((per_line == 6) | (per_line == 0)).all()):
        return None
    tokens = data.split()
    try:
        np.array(tokens[3::6]).astype(np.int64)
        values = np.array(tokens[4::6]).astype(np.float64)
    except (ValueError, OverflowError):
        return None
    if not bool(np.isfinite(values).all()):
        return None
    return np.array(tokens[0::6]), np.array(tokens[2::6]), values


def _columns_simple(
    raw: np.ndarray[Any, Any], max_line_bytes: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """The common layout without splitting into tokens: every line ends in a newline and
    holds six non-empty fields between single spaces, printable ASCII only, an all-digit rank
    and a plain decimal score (``-``, up to 15 digits, one ``.``). Fields are cut out of the
    bytes by their offsets; a score is its digits as an integer divided by a power of ten,
    both exact in a double, so the quotient is the correctly rounded value ``float()``
    gives. ``None`` for anything else (:func:`_columns` reads it by tokens)."""
    import numpy as np

    if not raw.size or raw[-1] != 10:
        return None
    ends = np.flatnonzero(raw == 10)
    gaps = np.flatnonzero(raw == 32)
    n = len(ends)
    # No other byte below 33 (tab, CR, control) and none above 126.
    if len(gaps) != 5 * n or int(np.count_nonzero((raw < 33) | (raw > 126))) != 6 * n:
        return None
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    if int((ends - starts).max()) + 1 > max_line_bytes + 1:
        return None
    sp = gaps.reshape(n, 5)
    # each line's five spaces inside it, no field empty (the spaces being sorted, the first
    # after the line's start and the last before its end place all five in the line)
    if not (
        bool((sp[:, 0] > starts).all())
        and bool((sp[:, 4] + 1 < ends).all())
        and bool((np.diff(sp, axis=1) > 1).all())
    ):
        return None
    bounds = [(starts, sp[:, 0]), (sp[:, 1] + 1, sp[:, 2]), (sp[:, 2] + 1, sp[:, 3])]
    bounds.append((sp[:, 3] + 1, sp[:, 4]))
    qids, docs, rank, score = (_field(raw, begin, stop) for begin, stop in bounds)
    for col in rank:
        if not bool(((col == 0) | ((col >= 48) & (col <= 57))).all()):
            return None
    mantissa = np.zeros(n, dtype=np.int64)
    fraction = np.zeros(n, dtype=np.int64)
    digits = np.zeros(n, dtype=np.int64)
    seen_dot = np.zeros(n, dtype=bool)
    negative = score[0] == 45
    for j, col in enumerate(score):
        value = col - np.uint8(48)  # a digit's value; any other byte wraps above 9
        digit = value <= 9
        dot = col == 46
        allowed = digit | dot | (negative if j == 0 else col == 0)
        if not bool(allowed.all()) or bool((dot & seen_dot).any()):
            return None
        mantissa = np.where(digit, mantissa * 10 + value, mantissa)
        digits += digit
        fraction += digit & seen_dot
        seen_dot |= dot
    if int(digits.min()) < 1 or int(digits.max()) > 15:
        return None
    values = mantissa.astype(np.float64) / (10.0**fraction)
    values[negative] *= -1.0
    return _fixed(qids), _fixed(docs), values


def _field(
    raw: np.ndarray[Any, Any], begin: np.ndarray[Any, Any], stop: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Row j: byte j of every line's field, NUL past its end (``uint8``, shape (widest, n)):
    one gather per byte position, not per byte; masked only past the shortest field."""
    import numpy as np

    length = stop - begin
    shortest = int(length.min())
    out = np.empty((int(length.max()), len(begin)), dtype=np.uint8)
    for j, row in enumerate(out):
        # past a field's end the byte is masked; "clip" keeps the last line's in range
        np.take(raw[j:], begin, out=row, mode="clip")
        if j >= shortest:
            row[length <= j] = 0
    return out


def _fixed(columns: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The fixed-width bytes array of a field's columns (:func:`_field`)."""
    import numpy as np

    return np.ascontiguousarray(columns.T).view(f"S{len(columns)}")[:, 0]


def _rank(
    qids: np.ndarray[Any, Any],
    docs: np.ndarray[Any, Any],
    scores: np.ndarray[Any, Any],
    ascii: bool,
) -> RankedRun | None:
    """Group the lines by query (a query split over several blocks is gathered), then rank by score
    descending, ties by docid descending (bytes order: strcmp's, as in trec_eval); ``None`` when
    a query lists a document twice."""
    import numpy as np

    n = len(qids)
    change = np.flatnonzero(qids[1:] != qids[:-1]) + 1 if n else np.array([], dtype=np.int64)
    bounds = np.concatenate(([0], change, [n])).astype(np.int64)
    if len(np.unique(qids[bounds[:-1]])) != len(bounds) - 1:
        # A query in several blocks: gather its lines (stable, so the blocks keep their order).
        order = np.argsort(qids, kind="stable")
        qids, docs, scores = qids[order], docs[order], scores[order]
        change = np.flatnonzero(qids[1:] != qids[:-1]) + 1
        bounds = np.concatenate(([0], change, [n])).astype(np.int64)
    sizes = np.diff(bounds)
    keys = None
    if sizes.size and sizes.size * int(sizes.max()) <= 2 * n + 4096:
        ranked = _grid_order(docs, scores, bounds, sizes)
        if ranked is None:
            return None
        order, words = ranked
        docs, scores = docs[order], scores[order]
        if words.shape[1] == 1:
            keys = words[order, 0]
    else:  # query sizes too uneven for one grid: query by query
        for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            group = docs[start:stop]
            ordered = np.sort(group)
            if stop - start > 1 and bool((ordered[1:] == ordered[:-1]).any()):
                return None
            # ascending by (score, docid), read backwards: score and docid both descending;
            # the score as trec_eval holds it, a C float (scores equal in 32 bits tie)
            rank = np.lexsort((group, scores[start:stop].astype(np.float32)))[::-1]
            docs[start:stop] = group[rank]
            scores[start:stop] = scores[start:stop][rank]
    names = [q.decode("utf-8") for q in qids[bounds[:-1]].tolist()]
    spans = dict(
        zip(names, zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True), strict=True)
    )
    return RankedRun(spans, docs, scores, ascii, keys=keys)


def _doc_words(docs: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each docid as big-endian 8-byte words of its NUL-padded bytes, shape (n, words): the
    words compare as the bytes do (strcmp's order), and equal ids have equal words."""
    import numpy as np

    width = -(-docs.dtype.itemsize // 8) * 8
    as_wide = docs if docs.dtype.itemsize == width else docs.astype(f"S{width}")
    return np.ascontiguousarray(as_wide).view(">u8").reshape(len(docs), -1)


def _grid_order(
    docs: np.ndarray[Any, Any],
    scores: np.ndarray[Any, Any],
    bounds: np.ndarray[Any, Any],
    sizes: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """The permutation that puts every query in trec_eval's order at once, with the docids'
    words (:func:`_doc_words`, in file order), or ``None`` when a query lists a document
    twice. Queries are the rows of a grid (a reshape when they are all as long, else padded
    to the longest), sorted along the rows (a row fits in cache, a sort of the whole run does
    not): by the score as a C float descending, then the docid descending. The docid order of
    a row also finds a document listed twice (equal neighbours)."""
    import numpy as np

    n = len(docs)
    words = _doc_words(docs)
    single = scores.astype(np.float32) + np.float32(0.0)  # -0.0 ties with 0.0, as in C
    bits = single.view(np.uint32)
    # the float's order as an unsigned integer's, then reversed: a smaller key, a higher score
    score_key = ~np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))
    rows, longest = len(sizes), int(sizes.max())
    regular = bool((sizes == longest).all())
    at: np.ndarray[Any, Any] | None = None
    if regular:
        grid = [words[:, k].reshape(rows, longest) for k in range(words.shape[1])]
        grid_score = score_key.reshape(rows, longest)
    else:
        column = np.arange(longest)
        real = column < sizes[:, None]
        at = np.where(real, bounds[:-1, None] + column, n)  # n: the padding's slot
        # a padding slot: docid 0 (no id starts with NUL) and the lowest score: sorts last
        grid = [np.append(words[:, k], np.uint64(0))[at] for k in range(words.shape[1])]
        grid_score = np.append(score_key, np.uint32(0xFFFFFFFF))[at]
    if len(grid) == 1:
        by_doc = np.argsort(grid[0], axis=1)
        ordered = [np.sort(grid[0], axis=1)]
    else:
        by_doc = np.lexsort(grid[::-1], axis=1)
        ordered = [np.take_along_axis(w, by_doc, axis=1) for w in grid]
    # two equal neighbours in docid order, not padding: a document listed twice
    same = ordered[0][:, 1:] != 0
    for w in ordered:
        same &= w[:, 1:] == w[:, :-1]
    if bool(same.any()):
        return None
    # one key per slot: the score, then the docid's place in the row's docid order (distinct)
    place = np.argsort(by_doc, axis=1)
    key = grid_score.astype(np.uint64) << np.uint64(32)
    key |= (longest - 1 - place).astype(np.uint64)
    rank = np.argsort(key, axis=1)
    if at is None:
        rank += bounds[:-1, None]
        return rank.ravel(), words
    return np.take_along_axis(at, rank, axis=1)[real], words


def _ranked_from_mapping(run: Mapping[str, Mapping[str, float]]) -> RankedRun:
    import numpy as np

    qids = [q.encode("utf-8") for q, docs in run.items() for _ in docs]
    docs = [d.encode("utf-8") for ranked in run.values() for d in ranked]
    values = [s for ranked in run.values() for s in ranked.values()]
    if not docs:
        return RankedRun({}, np.array([], dtype="S1"), np.array([], dtype=np.float64))
    ascii = all(len(d) == len(d.decode("utf-8")) for d in docs)
    ranked = _rank(np.array(qids), np.array(docs), np.array(values, dtype=np.float64), ascii)
    assert ranked is not None  # read_trec_run keeps one score per (query, document)
    return ranked


def _natural(qid: str) -> tuple[int, int | str]:
    return (0, int(qid)) if qid.isdigit() else (1, qid)


def write_trec_qrels(judgments: Mapping[str, Mapping[str, int]], out: IO[str]) -> int:
    """Write ``qid 0 docid grade`` lines (queries in natural order, documents sorted); returns
    the number of lines. Ids with whitespace cannot be expressed and raise ValueError."""
    n = 0
    for qid in sorted(judgments, key=_natural):
        for did in sorted(judgments[qid]):
            _check_token(qid, did)
            out.write(f"{qid} 0 {did} {int(judgments[qid][did])}\n")
            n += 1
    return n


def write_trec_run(run: Run, out: IO[str], *, tag: str = "searcheval") -> int:
    """Write ``qid Q0 docid rank score tag``. A ranked list gets score = len - rank + 1 so that
    trec_eval (which sorts by score) keeps the given order; a score mapping is written in
    descending score order, ties broken by doc id descending as trec_eval does."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag must be one token, got {tag!r}")
    n = 0
    for qid in sorted(run, key=_natural):
        ranked = run[qid]
        if isinstance(ranked, Mapping):
            pairs = sorted(ranked.items(), key=lambda kv: (-float(kv[1]), _neg(kv[0])))
            rows = [(did, float(score)) for did, score in pairs]
        else:
            rows = [(did, float(len(ranked) - i)) for i, did in enumerate(ranked)]
        for rank, (did, score) in enumerate(rows, start=1):
            _check_token(qid, did)
            out.write(f"{qid} Q0 {did} {rank} {score!r} {tag}\n")
            n += 1
    return n


class _Desc(str):
    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)


def _neg(did: str) -> _Desc:
    return _Desc(did)


def _check_token(qid: str, did: str) -> None:
    for v in (qid, did):
        if not v or any(c.isspace() for c in v):
            raise ValueError(f"id {v!r} contains whitespace: not expressible in TREC format")
