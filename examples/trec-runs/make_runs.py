"""Write runs/plain.run and runs/stemmed.run: tantivy's BM25 rankings of the how-to
collection of ../beir-tantivy (default tokenizer, English stemmer), top 100 per topic, in
TREC run format. ``--check`` compares them with the committed files instead of writing.

    python make_runs.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tantivy

HERE = Path(__file__).parent
CORPUS = HERE.parent / "beir-tantivy" / "howto" / "corpus.jsonl"
TOKENIZERS = {"plain": "default", "stemmed": "en_stem"}
DEPTH = 100


def run_text(name: str, tokenizer: str) -> str:
    schema = tantivy.SchemaBuilder()
    schema.add_text_field("id", stored=True, tokenizer_name="raw")
    schema.add_text_field("title", tokenizer_name=tokenizer)
    schema.add_text_field("text", tokenizer_name=tokenizer)
    index = tantivy.Index(schema.build())
    writer = index.writer(num_threads=1)
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        writer.add_document(tantivy.Document(id=doc["_id"], title=doc["title"], text=doc["text"]))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    lines = []
    for topic in (HERE / "topics.tsv").read_text(encoding="utf-8").splitlines():
        qid, text = topic.split("\t")
        query, _ = index.parse_query_lenient(text, ["title", "text"])
        for rank, (score, address) in enumerate(searcher.search(query, DEPTH).hits, 1):
            doc_id = searcher.doc(address)["id"][0]
            lines.append(f"{qid} Q0 {doc_id} {rank} {score:.6f} tantivy-{name}\n")
    return "".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args()
    stale = []
    for name, tokenizer in TOKENIZERS.items():
        path = HERE / "runs" / f"{name}.run"
        text = run_text(name, tokenizer)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print("differ from a fresh run: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
