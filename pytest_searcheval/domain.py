"""Domains: what a collection's hard filters mean, plugged in where a collection declares one.

The core knows filters only as an abstract predicate: a domain says which filter keys it
understands and why a document breaks a set of filters. A collection names its domain in
``collection.yaml`` (``domain: x402``); a native collection whose documents carry an ``x402``
record is an x402 collection too. A collection without a domain (any BEIR or TREC collection)
has no hard filters, and the x402 layer is never imported for it.

A project registers a domain of its own with :func:`register`::

    register("shop", "myproject.shop_domain:Shop")
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection, Document


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


#: domain name -> "module:attribute" of a Domain instance or class, imported on first use.
_REGISTRY: dict[str, str] = {"x402": "pytest_searcheval.x402.domain:X402"}
_LOADED: dict[str, Domain] = {}


def register(name: str, where: str) -> None:
    """Make domain ``name`` available; ``where`` is ``"module:attribute"``."""
    _REGISTRY[name] = where
    _LOADED.pop(name, None)


def domain_name(collection: Collection) -> str | None:
    declared = collection.manifest.get("domain")
    if declared:
        return str(declared)
    if any(d.x402 is not None for d in collection.documents.values()):
        return "x402"
    return None


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
