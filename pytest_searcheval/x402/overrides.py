"""Judged pairs forced to grade 0 because the listing breaks the query's labelled hard
constraints: the generic rule of :mod:`pytest_searcheval.collection.overrides`, which judges x402
listings with this domain's oracle."""

from __future__ import annotations

from pytest_searcheval.collection.overrides import Override, apply_constraint_overrides

__all__ = ["Override", "apply_constraint_overrides"]
