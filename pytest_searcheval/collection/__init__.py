"""Test collections: documents, queries and graded judgments, loaded from native, BEIR or TREC
files, validated (every problem with file, line and field; nothing is loaded partially) and hashed.

* native: ``collection.yaml``, ``corpus/*.jsonl``, ``qrels/queries.yaml``, ``qrels/judgments.tsv``,
  ``qrels/provenance.yaml`` (docs/formats.md);
* BEIR: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/{train,dev,test}.tsv``;
* TREC: qrels (``qid 0 docid grade``), topics (SGML or ``qid<TAB>text``), optional corpus.

Command line: ``python -m pytest_searcheval.collection {check,agree,export,overrides} ...``.
"""

from __future__ import annotations

from pytest_searcheval.collection.agree import Disagreement, MergeResult, merge_judgments
from pytest_searcheval.collection.hashing import content_hashes
from pytest_searcheval.collection.load import (
    BEIR_SPLITS,
    GENERIC_CLASS,
    UNJUDGED_SPLIT,
    load,
    load_beir,
    load_native,
    load_trec,
    read_judgments,
    read_run,
)
from pytest_searcheval.collection.model import (
    Asset,
    Collection,
    CollectionError,
    Document,
    Problem,
    Query,
)
from pytest_searcheval.collection.schemas import schema, validator
from pytest_searcheval.collection.trec import write_trec_qrels, write_trec_run

__all__ = [
    "BEIR_SPLITS",
    "GENERIC_CLASS",
    "UNJUDGED_SPLIT",
    "Asset",
    "Collection",
    "CollectionError",
    "Disagreement",
    "Document",
    "MergeResult",
    "Problem",
    "Query",
    "content_hashes",
    "load",
    "load_beir",
    "load_native",
    "load_trec",
    "merge_judgments",
    "read_judgments",
    "read_run",
    "schema",
    "validator",
    "write_trec_qrels",
    "write_trec_run",
]
