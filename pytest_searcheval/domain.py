"""Domains: what a collection's hard filters mean, plugged in where a collection declares one.

The core knows filters only as an abstract predicate: a domain says which filter keys it
understands and why a document breaks a set of filters. A collection names its domain in
``collection.yaml`` (``domain: x402``); a native collection whose documents carry an ``x402``
record is an x402 collection too. A collection without a domain (any BEIR or TREC collection)
has no hard filters, and the x402 layer is never imported for it.

A domain also validates what the generic loader cannot judge: the record a document carries
under the domain's ``record_key`` (``x402``), the payment assets of ``collection.yaml``, the hard
constraints a query labels, and collection-wide checks for ``searcheval collection check``. The
collection package reaches a domain only through this registry, by name, so it imports nothing of
any domain's code.

A project registers a domain of its own with :func:`register`::

    register("shop", "myproject.shop_domain:Shop")
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_searcheval.collection.model import BeirDocuments

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Asset, Collection, Document

#: (field, message): a problem the loader reports at the record's file and line.
FieldProblem = tuple[str, str]


class Domain(Protocol):
    """The hard-filter semantics of one kind of collection."""

    name: str
    filter_keys: tuple[str, ...]

    def violations(
        self, document: Document, filters: Mapping[str, Any], collection: Collection
    ) -> list[str]:
        """Why ``document`` breaks ``filters`` (empty when it satisfies them all)."""
        ...

    def applied(self, filters: Mapping[str, Any]) -> dict[str, Any]:
        """The filters of a response that this domain enforces (known keys, set values)."""
        ...

    # --- validation hooks: what the generic loader asks the collection's domain ---------------

    #: The key of the document record this domain owns (``"x402"``), or None.
    record_key: str | None

    def record_problems(self, record: Mapping[str, Any]) -> list[FieldProblem]:
        """Problems of a document's domain record; fields are relative to ``record_key``."""
        ...

    def asset_problems(self, asset: Mapping[str, Any]) -> list[FieldProblem]:
        """Problems of one payment asset of ``collection.yaml`` beyond its generic shape."""
        ...

    def filter_problems(
        self, filters: Mapping[str, Any], assets: Sequence[Asset]
    ) -> list[FieldProblem]:
        """Problems of a query's labelled hard constraints (unknown keys, bad values)."""
        ...

    def normalize_filters(self, filters: Mapping[str, Any]) -> dict[str, Any]:
        """The canonical form of well-formed constraints, as the loader stores them."""
        ...

    def collection_checks(self, collection: Collection, root: Path | None) -> list[str]:
        """Lines that ``python -m pytest_searcheval.collection check`` prints for this domain
        (suites of its own beside the collection, say); a problem raises ``CollectionError``."""
        ...


#: domain name -> "module:attribute" of a Domain instance or class, imported on first use.
_REGISTRY: dict[str, str] = {"x402": "pytest_searcheval.x402.domain:X402"}
_LOADED: dict[str, Domain] = {}


def register(name: str, where: str) -> None:
    """Make domain ``name`` available; ``where`` is ``"module:attribute"``."""
    _REGISTRY[name] = where
    _LOADED.pop(name, None)


#: document record key -> the domain that owns it (a document with that record belongs to it).
_RECORD_KEYS: dict[str, str] = {"x402": "x402"}


def register_record_key(key: str, name: str) -> None:
    """Documents carrying a record under ``key`` belong to domain ``name``."""
    _RECORD_KEYS[key] = name


def named(manifest: Mapping[str, Any], documents: Iterable[Document]) -> str | None:
    """The domain a collection declares in its manifest, else the one that owns a record its
    documents carry, else None (a generic collection)."""
    declared = manifest.get("domain")
    if declared:
        return str(declared)
    for doc in documents:
        for key, name in _RECORD_KEYS.items():
            if getattr(doc, key, None) is not None:
                return name
    return None


def owning(record_key: str) -> Domain:
    """The domain that owns document records under ``record_key``."""
    return get(_RECORD_KEYS[record_key])


def asset_domain(manifest: Mapping[str, Any]) -> Domain | None:
    """The domain that judges the payment assets of a manifest: the declared one, else the one
    that owns payment records (assets price those records' payment options)."""
    declared = manifest.get("domain")
    if declared:
        return get(str(declared)) if str(declared) in _REGISTRY else None
    return next((get(name) for name in dict.fromkeys(_RECORD_KEYS.values())), None)


#: documents mapping id -> (the mapping itself, its length, the domain its records name): a
#: query test asks for every query, and the scan reads every document (generic corpora hold
#: no record, so it reads them all: 0.08 s per query over 200,000 documents).
_SCANNED: dict[int, tuple[Mapping[str, Document], int, str | None]] = {}
_SCANNED_MAX = 8


def domain_name(collection: Collection) -> str | None:
    """:func:`named` for a collection; the documents are scanned once per mapping and size
    (documents are frozen; a collection gains or loses documents, it does not swap one
    domain's document for another's in place)."""
    declared = collection.manifest.get("domain")
    if declared:
        return str(declared)
    documents = collection.documents
    seen = _SCANNED.get(id(documents))
    if seen is not None and seen[0] is documents and seen[1] == len(documents):
        return seen[2]
    # BEIR documents carry no domain's record: nothing to read.
    name = named(
        collection.manifest, () if isinstance(documents, BeirDocuments) else documents.values()
    )
    if len(_SCANNED) >= _SCANNED_MAX:
        _SCANNED.pop(next(iter(_SCANNED)))
    # the mapping is held, so its id cannot name another mapping while cached
    _SCANNED[id(documents)] = (documents, len(documents), name)
    return name


def get(name: str) -> Domain:
    if name not in _LOADED:
        if name not in _REGISTRY:
            raise KeyError(f"unknown domain {name!r}: expected one of {', '.join(_REGISTRY)}")
        module, _, attr = _REGISTRY[name].partition(":")
        value = getattr(importlib.import_module(module), attr)
        _LOADED[name] = value() if isinstance(value, type) else value
    return _LOADED[name]


def domain_of(collection: Collection) -> Domain | None:
    name = domain_name(collection)
    return None if name is None else get(name)


def known() -> tuple[str, ...]:
    """The names of the registered domains."""
    return tuple(_REGISTRY)
