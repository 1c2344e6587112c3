"""Search quality of tantivy (a Rust full-text search library, run in process) on the small
BEIR collection in howto/: two profiles, tantivy's default tokenizer and its English
stemmer, each an in-memory index of title and text, ranked by tantivy's BM25."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tantivy

from pytest_searcheval.targets import CallableTarget, Hit, SearchResponse

CORPUS = Path(__file__).parent / "howto" / "corpus.jsonl"
PROFILES = {"plain": "default", "stemmed": "en_stem"}  # profile -> tantivy tokenizer


def build_index(tokenizer: str) -> tantivy.Index:
    schema = tantivy.SchemaBuilder()
    schema.add_text_field("id", stored=True, tokenizer_name="raw")
    schema.add_text_field("title", tokenizer_name=tokenizer)
    schema.add_text_field("text", tokenizer_name=tokenizer)
    index = tantivy.Index(schema.build())  # no path: the index lives in memory
    writer = index.writer(num_threads=1)  # one segment: the same index on every run
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        doc = json.loads(line)
        writer.add_document(tantivy.Document(id=doc["_id"], title=doc["title"], text=doc["text"]))
    writer.commit()
    index.reload()
    return index


@pytest.fixture(scope="session")
def searcheval_target() -> CallableTarget:
    indexes = {profile: build_index(tokenizer) for profile, tokenizer in PROFILES.items()}

    def search(query: str, *, profile: str, limit: int, filters: object, extract: bool):
        index = indexes[profile]
        parsed, _ = index.parse_query_lenient(query, ["title", "text"])  # no syntax errors
        searcher = index.searcher()
        hits = searcher.search(parsed, limit).hits
        return SearchResponse(hits=tuple(Hit(searcher.doc(a)["id"][0], s) for s, a in hits))

    return CallableTarget(search, profiles=PROFILES, description={"engine": "tantivy (BM25)"})
