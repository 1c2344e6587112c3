"""Hard filters of a query: parsed, merged with the extracted ones, and applied to a ranking.

The predicate itself is the x402 layer's SQL (engine/x402.py); constraint extraction is
engine/extract.py. Filters only ever remove listings from a ranking, never reorder it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg import sql

from pytest_searcheval.engine import extract as extraction
from pytest_searcheval.engine import x402
from pytest_searcheval.engine.catalog import Catalog

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Asset
    from pytest_searcheval.engine.isolation import IsolatedSchema, RolledBackSchema


@dataclass(frozen=True)
class Constraints:
    """What a query asks for: the text to rank, the filters applied, the ones extracted."""

    text: str
    applied: x402.Filters
    extracted: dict[str, str]


def constraints(
    q: str, filters: Mapping[str, Any] | None, *, extract: bool, assets: Sequence[Asset]
) -> Constraints:
    """Explicit filters beat extracted ones key by key; invalid values raise
    ``x402.FilterError`` (a ValueError naming the field)."""
    applied = x402.parse_filters(filters, assets)
    extracted: dict[str, str] = {}
    text = q
    if extract:
        found = extraction.extract(q, assets)
        found_filters = x402.parse_filters(found.filters, assets)
        extracted = found_filters.to_dict()
        applied = applied.merged_over(found_filters)
        text = found.text or q
    return Constraints(text, applied, extracted)


def candidate_query(applied: x402.Filters) -> tuple[sql.Composable | None, dict[str, Any]]:
    """The hard-filter predicate as a sub-query of candidate ``doc_id``s (None: no filter)."""
    if not applied:
        return None, {}
    fragment, params = x402.to_sql(applied, doc="d", prefix="xf_")
    query = sql.SQL("SELECT d.id AS doc_id FROM documents d WHERE ") + sql.SQL(fragment)
    return query, dict(params)


def satisfying(
    applied: x402.Filters,
    ids: Sequence[str],
    *,
    catalog: Catalog,
    exact: bool,
    assets: Sequence[Any],
) -> Set[str]:
    """The ids among ``ids`` whose listing, as ``catalog`` holds it, satisfies ``applied``:
    checked against the body a search serves, never against rows a later write committed.

    Exact-scan catalogs find every listing that passes once per filter combination and
    catalog version (:meth:`Catalog.satisfying_all`); HNSW catalogs check only ``ids`` (at
    100,000 listings a hybrid query has 600 candidates).
    """
    if not ids:
        return set()
    if exact:
        return every_satisfying(applied, catalog=catalog, assets=assets)
    return {i for i in ids if catalog.satisfies(i, applied, assets)}


def every_satisfying(
    applied: x402.Filters, *, catalog: Catalog, assets: Sequence[Any]
) -> frozenset[str]:
    """Every indexed id whose listing in ``catalog`` satisfies ``applied`` (memoised per
    filter combination for that catalog version)."""
    return catalog.satisfying_all(applied, assets)


def sql_satisfying(
    applied: x402.Filters, *, schema: IsolatedSchema | RolledBackSchema
) -> frozenset[str]:
    """Every id whose committed rows satisfy ``applied``: the SQL predicate the in-memory
    check (``x402.matches``) is held to (tests/engine/test_postings.py)."""
    fragment, params = x402.to_sql(applied, doc="d", prefix="xf_")
    query = sql.SQL("SELECT d.id FROM documents d WHERE ") + sql.SQL(fragment)
    with schema.connection() as conn:
        return frozenset(str(r[0]) for r in conn.execute(query, params).fetchall())
