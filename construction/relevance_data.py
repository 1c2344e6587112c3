"""The relevance model's training examples, from the committed training data only.

Inputs (their sha256 go into every model's manifest, and ``check`` refuses a model trained on
other bytes): the catalog (corpus/catalog.jsonl), the 21 writers' needs (training/writers/t*.yaml)
and the judged sample (training/judging/{A,B,adjudication}.tsv). Never the shipped qrels/, never
an outside set.

Labels, by what training/judging/agreement.md measured of them:

  positive    the writer's target (relevant in 98.8% of judged pairs), and every judged listing
              with a merged grade >= 2;
  excluded    the other listings of an answerable need's capability, unless judged: a sibling
              is relevant only 65.8% of the time, so it is neither a positive nor a negative;
  negative    every other listing (a judged listing with a merged grade <= 1 included);
  nothing     a need the writer called unanswerable, unless a judge found a listing for it
              (5.6% of them), and every answerable need again against the catalog with its
              whole capability (and its judged positives) removed: leave-capability-out.

Merged grade: the two judges' grade when they agree, the lower one when one apart, the third
judge's when two or more apart (training/judging/adjudication.tsv).

Folds are by capability: every capability of the catalog falls to one of ``FOLDS`` folds
(seeded), and a need to the fold of its capability (a need no listing serves: its nearby
capability, the writer's label), so a held-out fold's capabilities are never a positive in
training.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FOLDS = 3
SEED = 20261202


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def input_files(root: Path = ROOT) -> list[Path]:
    judged = [root / "training/judging" / n for n in ("A.tsv", "B.tsv", "adjudication.tsv")]
    writers = sorted((root / "training/writers").glob("t*.yaml"))
    return [root / "corpus/catalog.jsonl", *writers, *judged]


def input_hashes(root: Path = ROOT) -> dict[str, str]:
    return {str(p.relative_to(root)): _sha(p) for p in input_files(root)}


@dataclass
class Listing:
    id: str
    capability: str
    category: str
    embed_text: str  # what the engine's bi-encoder reads (engine/documents.py)
    rerank_text: str  # what hybrid_rerank's model reads


@dataclass
class Need:
    id: str
    kind: str
    text: str
    capability: str
    positives: set[str] = field(default_factory=set)
    negatives_judged: set[str] = field(default_factory=set)
    excluded: set[str] = field(default_factory=set)
    answerable: bool = True
    fold: int = 0


def listings(root: Path = ROOT) -> list[Listing]:
    from pytest_searcheval.engine.documents import (
        document_from_record,
        embedding_text,
        rerank_text,
    )

    out = []
    for line in (root / "corpus/catalog.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        doc = document_from_record(record)
        side = record["sidecar"]
        out.append(
            Listing(
                doc.id, side["capability"], side["category"], embedding_text(doc), rerank_text(doc)
            )
        )
    return sorted(out, key=lambda x: x.id)


def _grades(path: Path, column: str = "grade") -> dict[tuple[str, str], int]:
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as f:
        return {
            (r["query_id"], r["doc_id"]): int(r[column])
            for r in csv.DictReader(f, delimiter="\t")
            if r[column].strip()
        }


def merged_grades(root: Path = ROOT) -> dict[tuple[str, str], int]:
    judged = root / "training/judging"
    a, b = _grades(judged / "A.tsv"), _grades(judged / "B.tsv")
    third = _grades(judged / "adjudication.tsv")
    out = {}
    for key in sorted(set(a) & set(b)):
        if key in third:
            out[key] = third[key]
        elif abs(a[key] - b[key]) <= 1:
            out[key] = min(a[key], b[key])
        else:
            raise SystemExit(
                f"training/judging: {key} is {a[key]} and {b[key]} with no third grade"
            )
    return out


def capability_folds(docs: list[Listing], folds: int = FOLDS) -> dict[str, int]:
    caps = sorted({d.capability for d in docs})
    random.Random(SEED).shuffle(caps)
    return {c: i % folds for i, c in enumerate(caps)}


def needs(root: Path = ROOT, docs: list[Listing] | None = None) -> list[Need]:
    """Every distinct need (a text two writers typed alike is kept once), labelled."""
    docs = docs if docs is not None else listings(root)
    fold_of = capability_folds(docs)
    by_cap: dict[str, set[str]] = {}
    for d in docs:
        by_cap.setdefault(d.capability, set()).add(d.id)
    grades = merged_grades(root)
    judged: dict[str, dict[str, int]] = {}
    for (qid, did), g in grades.items():
        judged.setdefault(qid, {})[did] = g
    out: list[Need] = []
    seen: set[str] = set()
    for path in sorted((root / "training/writers").glob("t*.yaml")):
        for raw in yaml.safe_load(path.read_text(encoding="utf-8")):
            key = " ".join(raw["text"].lower().split())
            if key in seen:
                continue
            seen.add(key)
            need = Need(raw["id"], raw["kind"], raw["text"], raw["capability"])
            need.fold = fold_of[need.capability]
            grade = judged.get(need.id, {})
            need.positives = {d for d, g in grade.items() if g >= 2}
            need.negatives_judged = {d for d, g in grade.items() if g <= 1}
            if raw["target"] is not None and grade.get(raw["target"], 3) >= 2:
                need.positives.add(raw["target"])
            need.answerable = bool(need.positives)
            if raw["target"] is not None:
                need.excluded = by_cap[need.capability] - need.positives - need.negatives_judged
            out.append(need)
    return out


def removed_for_lco(need: Need, docs: list[Listing]) -> set[str]:
    """The listings taken away for the need's leave-capability-out copy."""
    return {d.id for d in docs if d.capability == need.capability} | need.positives


def main() -> None:
    docs = listings()
    every = needs(docs=docs)
    answerable = [n for n in every if n.answerable]
    print(f"{len(docs)} listings, {len({d.capability for d in docs})} capabilities")
    print(f"{len(every)} needs: {len(answerable)} answerable, {len(every) - len(answerable)} not")
    for f in range(FOLDS):
        held = [n for n in every if n.fold == f]
        print(f"fold {f}: {len(held)} needs, {sum(n.answerable for n in held)} answerable")
    print(json.dumps(input_hashes(), indent=1)[:400])


if __name__ == "__main__":
    main()
