"""Pooling the unjudged results of the current runs into blind judging packs, and back.

``pool``: the candidates of a query are the top ``depth`` documents of every run given (the
profiles of saved reports, TREC run files); the pairs that the collection has not judged yet
form the pool. For each judge, :func:`write_packs` writes Markdown packs in which each query's
candidates appear in an order shuffled for that judge (seeded by the judge's name), under
opaque handles, with the rubric: a pack shows the query's text and the document's own content,
never a rank, a score, which system found it, or catalog metadata that could hint at the answer
(a document's ``sidecar``). The handle -> (query, document) key and the pool's recipe (which
system found what) are written apart, under ``keys/``, for :func:`collect` alone.

``collect``: reads a judge's answers (``handle<TAB>grade``) and returns that judge's grades as
judgments (``query_id<TAB>doc_id<TAB>grade``), refusing unknown, duplicate, missing or
out-of-scale answers with file and line. Two judges' files then go to ``searcheval agree``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from pytest_searcheval.collection.io import Problems
from pytest_searcheval.collection.model import Asset, Collection, Document

POOL_VERSION = 1
DEFAULT_DEPTH = 10
DEFAULT_PAIRS_PER_PACK = 250

#: Rubrics for the three scales most collections use; any other scale needs its own (--rubric).
RUBRICS: dict[tuple[int, ...], str] = {
    (0, 1, 2, 3): """# Relevance rubric (grades 0-3)

You see a search query and documents. Grade each document against the query on its own; the
order in which documents appear means nothing, and nothing tells you which system found them.

- **3: answers the query.** Someone who typed this query would pick this document and be done.
- **2: on topic, not the best answer.** The same need, but narrower, broader or a neighbouring
  variant; useful, not sufficient.
- **1: tangential or low quality.** A related topic but a different need, or the right topic
  in a document that is not trustworthy as an answer (repeated keywords instead of content, a
  copy of another document, almost no information).
- **0: not relevant**, or the document breaks a hard requirement the query states (a place, a
  format, a price limit, a kind of resource).

A document is not made relevant by sharing a word with the query. Judge its content, not its
title alone. Use the whole scale.
""",
    (0, 1, 2): """# Relevance rubric (grades 0-2)

You see a search query and documents. Grade each document against the query on its own; the
order in which documents appear means nothing, and nothing tells you which system found them.

- **2: highly relevant.** The document answers the query; someone who typed it would be done.
- **1: partially relevant.** On topic and useful, but it answers only part of the need, or a
  narrower or broader one.
- **0: not relevant**, or the document breaks a hard requirement the query states.

A document is not made relevant by sharing a word with the query. Judge its content, not its
title alone.
""",
    (0, 1): """# Relevance rubric (grades 0-1)

You see a search query and documents. Grade each document against the query on its own; the
order in which documents appear means nothing, and nothing tells you which system found them.

- **1: relevant.** The document serves the need the query expresses, wholly or in part.
- **0: not relevant**, or it breaks a hard requirement the query states.

A document is not made relevant by sharing a word with the query. Judge its content, not its
title alone.
""",
}


class PoolError(ValueError):
    """Input that cannot be pooled or collected; the message names the file and the reason."""


@dataclass
class Pool:
    """``pairs[qid][doc_id]`` = the systems that returned the unjudged document in their top
    ``depth``; ``judged`` counts the candidates left out because they are judged already."""

    depth: int
    systems: list[str] = field(default_factory=list)
    pairs: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    judged: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(len(v) for v in self.pairs.values())


def _ranked(scores: Mapping[str, float]) -> list[str]:
    """A run's documents by score descending, ties by doc id descending (trec_eval's order)."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def runs_of_report(
    report: Mapping[str, Any], name: str, profiles: Sequence[str] | None = None
) -> dict[str, dict[str, list[str]]]:
    """``{system: {qid: ranked ids}}`` for the available profiles of a saved report."""
    out: dict[str, dict[str, list[str]]] = {}
    available = [p for p, e in (report.get("profiles") or {}).items() if e.get("available")]
    chosen = available if not profiles else [p for p in profiles if p in available]
    if profiles:
        missing = [p for p in profiles if p not in available]
        if missing:
            raise PoolError(
                f"{name}: profile {missing[0]!r} is not an available profile of the report "
                f"(available: {', '.join(available) or 'none'})"
            )
    for p in chosen:
        system = f"{name}:{p}"
        out[system] = {
            qid: list((q.get("profiles") or {}).get(p, {}).get("ids") or [])
            for qid, q in (report.get("queries") or {}).items()
            if p in (q.get("profiles") or {})
        }
    return out


def runs_of_trec(scores: Mapping[str, Mapping[str, float]], name: str) -> dict[str, Any]:
    return {name: {qid: _ranked(docs) for qid, docs in scores.items()}}


#: How a scale is declared, for the messages that ask for one.
DECLARE_GRADES = (
    "declare the scale: searcheval pool --grades 0,1 (or 0-3, ...); for pytest "
    "--search-eval-grades or the ini key search_eval_grades"
)


def check_scale(grades: Sequence[int]) -> None:
    """A judge must be able to say "not relevant": a scale without a grade of 0 or below (the
    ``[1]`` that qrels listing only positives imply) cannot be pooled."""
    scale = sorted(grades)
    if not scale or scale[0] > 0:
        raise PoolError(
            f"the grade scale {scale} has no grade for a document that is not relevant (the "
            "scale is the grades the qrels hold, and qrels that list only positives, as most "
            f"TREC and BEIR sets do, hold only {scale or '[]'}): {DECLARE_GRADES}"
        )


def build_pool(
    collection: Collection, runs: Mapping[str, Mapping[str, Sequence[str]]], depth: int
) -> Pool:
    """The unjudged (query, document) pairs in the top ``depth`` of every run.

    A query unknown to the collection, or a document it does not hold, is an error naming the
    run: neither can be judged (a judge needs the query's text and the document's content).
    """
    if depth < 1:
        raise PoolError(f"depth: expected a positive integer, got {depth}")
    check_scale(collection.grades)
    if not collection.documents:
        raise PoolError(
            "the collection has no document text (a TREC collection loaded without a corpus); "
            "judges need the documents' content"
        )
    pool = Pool(depth=depth, systems=sorted(runs))
    problems: list[str] = []
    judged: set[tuple[str, str]] = set()
    for system in sorted(runs):
        for qid, ids in sorted(runs[system].items()):
            if qid not in collection.queries:
                problems.append(f"{system}: query {qid!r} is not in the collection")
                continue
            known = collection.judgments.get(qid, {})
            for doc_id in list(ids)[:depth]:
                if doc_id not in collection.documents:
                    problems.append(
                        f"{system}: query {qid!r} returned {doc_id!r}, which is not in the corpus"
                    )
                    continue
                if doc_id in known:
                    judged.add((qid, doc_id))
                    continue
                found = pool.pairs.setdefault(qid, {}).setdefault(doc_id, [])
                if system not in found:
                    found.append(system)
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise PoolError(f"{len(problems)} candidates cannot be pooled:\n  {shown}{more}")
    pool.judged = len(judged)
    return pool


def _price(option: Mapping[str, Any], assets: Sequence[Asset]) -> str:
    amount = str(option.get("amount", "?"))
    for asset in assets:
        if asset.address == option.get("asset") and asset.network == option.get("network"):
            units = Decimal(amount) / (Decimal(10) ** asset.decimals) if amount.isdigit() else None
            if units is None:
                break
            usd = "" if asset.usd is None else f", about ${float(units * asset.usd):.4g}"
            return f"{units.normalize():f} {asset.code}{usd}"
    return f"{amount} base units of an unregistered asset"


def _scalar(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_scalar(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


def card(doc: Document, assets: Sequence[Asset]) -> str:
    """What a judge sees of a document: title, text, its fields, and for an x402 listing what
    a client sees on the wire (type, resource, tool, payment options). Never the ``sidecar``:
    catalog metadata (category, liveness) a judge must not lean on."""
    lines = [f"**{doc.title}**" if doc.title else "**(no title)**"]
    wire = doc.x402 or {}
    if wire:
        lines.append(f"type: {wire.get('type', 'n/a')}")
        if wire.get("resource"):
            lines.append(f"resource: {wire['resource']}")
        tool = wire.get("tool") or {}
        if isinstance(tool, dict) and tool.get("name"):
            lines.append(f"tool: {tool['name']}")
    lines.append(f"text: {' '.join(doc.text.split())}")
    for key in sorted(doc.fields):
        lines.append(f"{key}: {_scalar(doc.fields[key])}")
    options = [
        f"{o.get('network')} / {o.get('scheme')} / {_price(o, assets)}"
        for o in wire.get("accepts") or []
        if isinstance(o, dict)
    ]
    if options:
        lines.append("payment options: " + "; ".join(options))
    if isinstance(wire.get("extensions"), dict) and wire["extensions"]:
        lines.append("extensions: " + ", ".join(sorted(wire["extensions"])))
    return "\n".join("    " + line for line in lines)


def rubric_for(collection: Collection, path: Path | None) -> str:
    """``path``'s text; else ``qrels/rubric.md`` of the collection; else the built-in rubric
    for its scale (0-3, 0-2 or 0-1); any other scale needs its own."""
    if path is not None:
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PoolError(f"{path}: cannot read the rubric: {exc.strerror}") from None
    if collection.root is not None:
        own = Path(collection.root) / "qrels" / "rubric.md"
        if own.is_file():
            return own.read_text(encoding="utf-8")
    scale = tuple(sorted(collection.grades))
    if scale in RUBRICS:
        return RUBRICS[scale]
    raise PoolError(
        f"no built-in rubric for the grade scale {list(scale)}: write one and pass --rubric FILE "
        "(or put it in the collection's qrels/rubric.md), or, when the qrels do not hold every "
        f"grade of their scale, {DECLARE_GRADES}"
    )


def _write(path: Path, text: str) -> None:
    from pytest_searcheval.files import write_atomic

    write_atomic(path, text)


def _digest(*parts: str) -> str:
    return hashlib.sha256(":".join(parts).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PackSet:
    judge: str
    packs: list[Path]
    answers: Path
    key: Path
    pairs: int


def write_packs(
    collection: Collection,
    pool: Pool,
    judge: str,
    out: Path,
    *,
    rubric: str,
    pairs_per_pack: int = DEFAULT_PAIRS_PER_PACK,
    seed: str = "",
) -> PackSet:
    """One judge's packs under ``out/<judge>/`` and their key under ``out/keys/<judge>.json``.

    The order of queries and of documents within a query is shuffled by a generator seeded
    with the judge's name (and ``seed``), so two judges see different orders and a rerun
    writes the same packs. Handles are opaque digests of judge, query and document.
    """
    if not judge or any(c in judge for c in "/\\") or judge in (".", "..", "keys"):
        raise PoolError(f"judge name {judge!r}: expected a plain name (no path separator)")
    if pairs_per_pack < 1:
        raise PoolError(f"pairs per pack: expected a positive integer, got {pairs_per_pack}")
    rng = random.Random(int(_digest("pool", seed, judge)[:16], 16))
    qids = sorted(pool.pairs)
    rng.shuffle(qids)
    batches: list[list[str]] = [[]]
    size = 0
    for qid in qids:
        if size >= pairs_per_pack:
            batches.append([])
            size = 0
        batches[-1].append(qid)
        size += len(pool.pairs[qid])
    folder = out / judge
    folder.mkdir(parents=True, exist_ok=True)
    key: dict[str, list[str]] = {}
    packs: list[Path] = []
    answer_lines: list[str] = []
    grades = ", ".join(str(g) for g in sorted(collection.grades))
    for n, batch in enumerate(b for b in batches if b):
        name = f"pack-{n + 1:02d}.md"
        parts = [
            f"# Judging pack {n + 1:02d} for {judge}\n\n"
            f"Grade every document below with one of {grades} (rubric.md). Write the grades "
            "into answers.tsv, one `handle<TAB>grade` line per document.\n"
        ]
        for qid in batch:
            label = _digest(judge, "query", qid)[:6]
            parts.append(f"\n## Query {label}: {collection.queries[qid].text!r}\n\n")
            doc_ids = sorted(pool.pairs[qid])
            rng.shuffle(doc_ids)
            for doc_id in doc_ids:
                handle = _digest(judge, qid, doc_id)[:10]
                key[handle] = [qid, doc_id]
                parts.append(
                    f"- `{handle}`\n{card(collection.documents[doc_id], collection.assets)}\n"
                )
                answer_lines.append(f"{handle}\t\n")
        _write(folder / name, "".join(parts))
        packs.append(folder / name)
    _write(folder / "rubric.md", rubric)
    answers = folder / "answers.tsv"
    _write(
        answers,
        f"# {judge}: one line per document of the packs, in pack order: handle<TAB>grade "
        f"({grades}); lines starting with # are ignored\n" + "".join(answer_lines),
    )
    keys = out / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    key_path = keys / f"{judge}.json"
    _write(
        key_path,
        json.dumps(
            {
                "pool_version": POOL_VERSION,
                "judge": judge,
                "grades": sorted(collection.grades),
                "collection": dict(collection.hashes),
                "pairs": dict(sorted(key.items())),
            },
            indent=1,
            sort_keys=True,
        )
        + "\n",
    )
    return PackSet(judge=judge, packs=packs, answers=answers, key=key_path, pairs=len(key))


def write_recipe(pool: Pool, out: Path, sources: Iterable[str], hashes: Mapping[str, str]) -> Path:
    """``out/keys/pool.json``: how the pool was made and which system found each pair."""
    path = out / "keys" / "pool.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(
        path,
        json.dumps(
            {
                "pool_version": POOL_VERSION,
                "recipe": {
                    "depth": pool.depth,
                    "systems": pool.systems,
                    "sources": list(sources),
                    "left_out_judged": pool.judged,
                    "collection": dict(hashes),
                },
                "pool": {q: dict(sorted(d.items())) for q, d in sorted(pool.pairs.items())},
            },
            indent=1,
            sort_keys=True,
        )
        + "\n",
    )
    return path


def read_key(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PoolError(f"{path}: cannot read the key: {exc.strerror}") from None
    except ValueError as exc:
        raise PoolError(f"{path}: the key is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("pool_version") != POOL_VERSION:
        raise PoolError(f"{path}: expected a pool key with pool_version {POOL_VERSION}")
    pairs = data.get("pairs")
    if not isinstance(pairs, dict) or not all(
        isinstance(v, list) and len(v) == 2 for v in pairs.values()
    ):
        raise PoolError(f"{path}: field pairs: expected {{handle: [query_id, doc_id]}}")
    return data


def collect(
    key_path: Path, answer_paths: Sequence[Path], declared: Sequence[int] | None = None
) -> dict[str, dict[str, int]]:
    """One judge's grades as ``{qid: {doc_id: grade}}``; every problem reported at once. The
    scale is ``declared``, else the key's (the collection's when the packs were written)."""
    key = read_key(key_path)
    pairs: dict[str, list[str]] = key["pairs"]
    scale = sorted(declared) if declared is not None else [int(g) for g in key.get("grades") or []]
    problems = Problems()
    grades: dict[str, tuple[str, int, int]] = {}
    for path in answer_paths:
        name = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.add(name, None, None, f"cannot read the answers: {exc}")
            continue
        for line, raw in enumerate(text.splitlines(), 1):
            body = raw.strip()
            if not body or body.startswith("#"):
                continue
            parts = body.split()
            handle = parts[0]
            if handle not in pairs:
                problems.add(name, line, "handle", f"unknown handle {handle!r} (not in {key_path})")
                continue
            if len(parts) == 1:
                continue  # not graded yet: counted with the missing ones below
            if len(parts) != 2:
                problems.add(name, line, "grade", f"expected 'handle<TAB>grade', got {raw!r}")
                continue
            try:
                grade = int(parts[1])
            except ValueError:
                grade = None
            if grade is None or grade not in scale:
                problems.add(
                    name,
                    line,
                    "grade",
                    f"expected a grade in {', '.join(map(str, scale))}, got {parts[1]!r}",
                )
                continue
            if handle in grades and grades[handle][2] != grade:
                first_name, first_line, _ = grades[handle]
                problems.add(
                    name,
                    line,
                    "handle",
                    f"{handle} graded {grade} here and {grades[handle][2]} at "
                    f"{first_name}:{first_line}",
                )
                continue
            grades.setdefault(handle, (name, line, grade))
    missing = sorted(set(pairs) - set(grades))
    if missing:
        problems.add(
            str(answer_paths[0]) if answer_paths else str(key_path),
            None,
            "grade",
            f"{len(missing)} of {len(pairs)} documents have no grade yet (e.g. "
            f"{', '.join(missing[:5])})",
        )
    if problems:
        shown = "\n".join(f"  {p}" for p in problems.items[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        raise PoolError(f"{len(problems)} problems in the answers:\n{shown}{more}")
    out: dict[str, dict[str, int]] = {}
    for handle, (_, _, grade) in grades.items():
        qid, doc_id = pairs[handle]
        out.setdefault(str(qid), {})[str(doc_id)] = grade
    return out
