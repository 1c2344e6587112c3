"""The engine's reads: a search through the profile pipelines (engine/search.py), a page of
listings, and the no-result calibration (engine/calibrate.py) that searches without the cut.

:class:`EngineReads` is one part of :class:`engine.core.Engine`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pytest_searcheval.collection.model import Asset, Collection
from pytest_searcheval.engine import calibrate as calibration
from pytest_searcheval.engine import documents, restrict, search, threshold, x402

if TYPE_CHECKING:
    from pytest_searcheval.engine.catalog import Catalog
    from pytest_searcheval.engine.core import Engine


class EngineReads:
    """Reads of :class:`engine.core.Engine`, which sets these attributes."""

    assets: list[Asset]
    catalog: Catalog
    _hnsw: bool

    def _engine(self) -> Engine:
        # The pipelines take the whole engine (settings, embedder, schema, pools).
        return cast("Engine", self)

    def search(
        self,
        q: str,
        *,
        profile: str = "hybrid",
        limit: int = 10,
        filters: Mapping[str, Any] | None = None,
        extract: bool = True,
        apply_threshold: bool = True,
        explain: bool = False,
    ) -> dict[str, Any]:
        """The ``/search`` body; raises ``ProfileUnavailable`` / ``ValueError``.
        ``apply_threshold=False`` returns the ranking the no-result cut would suppress;
        ``explain=True`` adds each result's ``explanation`` (engine/explain.py)."""
        return search.run(
            self._engine(),
            q,
            profile=profile,
            limit=limit,
            filters=filters,
            extract=extract,
            apply_threshold=apply_threshold,
            explain=explain,
        )

    def list_resources(
        self, *, filters: Mapping[str, Any] | None = None, limit: int = 100, offset: int = 0
    ) -> dict[str, Any]:
        """The ``/discovery/resources`` page: live listings that satisfy ``filters``, in id
        order, ``limit`` of them from ``offset``: ``{"total", "items": [{"id", "resource"}]}``.
        Raises ``x402.FilterError`` for an invalid filter value."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit: expected a positive integer, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset: expected a non-negative integer, got {offset!r}")
        catalog = self.catalog  # one version for the page: the filters checked on its bodies
        ids = catalog.ordered_live()
        applied = x402.parse_filters(filters, self.assets)
        if applied:
            allowed = restrict.satisfying(
                applied, ids, catalog=catalog, exact=not self._hnsw, assets=self.assets
            )
            ids = [i for i in ids if i in allowed]
        docs = catalog.docs
        return {
            "total": len(ids),
            "items": [
                {"id": i, "resource": documents.resource_body(docs[i])}
                for i in ids[offset : offset + limit]
            ],
        }

    def search_uncut(self, text: str, *, profile: str, limit: int = 10) -> dict[str, Any]:
        """See :func:`engine.calibrate.search_uncut`."""
        return calibration.search_uncut(self._engine(), text, profile=profile, limit=limit)

    def threshold_samples(
        self,
        collection: Collection,
        *,
        split: str = "dev",
        profiles: Sequence[str] = ("lexical", "semantic", "hybrid"),
        level: int = 2,
    ) -> dict[str, list[threshold.Sample]]:
        """Confidence features of every no-result and answerable query of ``split``."""
        return calibration.threshold_samples(
            self._engine(), collection, split=split, profiles=profiles, level=level
        )

    def calibrate(
        self,
        collection: Collection,
        *,
        split: str = "dev",
        max_answerable_loss: float = 0.02,
        profiles: Sequence[str] = calibration.CALIBRATED_PROFILES,
    ) -> dict[str, threshold.Fit]:
        """Fit no-result rules on ``split`` and install them in this engine's settings."""
        return calibration.calibrate(
            self._engine(),
            collection,
            split=split,
            max_answerable_loss=max_answerable_loss,
            profiles=profiles,
        )
