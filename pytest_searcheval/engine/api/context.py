"""What the handlers share: the engine behind the service and the service's settings.

``create_app`` stores one :class:`ServiceContext` on ``app.state.context``; every handler
reads it with :func:`of` (its request's application), so a router holds no state of its own
and two applications in one process never see each other's engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from starlette.requests import Request

from pytest_searcheval.engine.x402 import AssetLike

__all__ = ["SearchEngine", "ServiceContext", "of"]


class SearchEngine(Protocol):
    """What the app needs of an engine (``engine.core.Engine`` fits)."""

    @property
    def assets(self) -> Sequence[AssetLike]: ...

    def search(
        self,
        q: str,
        *,
        profile: str = ...,
        limit: int = ...,
        filters: Mapping[str, Any] | None = ...,
        extract: bool = ...,
        explain: bool = ...,
    ) -> dict[str, Any]: ...

    def list_resources(
        self,
        *,
        filters: Mapping[str, Any] | None = ...,
        limit: int = ...,
        offset: int = ...,
    ) -> dict[str, Any]: ...

    def profiles(self) -> Mapping[str, str | None]: ...

    def describe(self) -> Mapping[str, Any]: ...

    def upsert(self, record: Mapping[str, Any]) -> None: ...

    def delete(self, doc_id: str) -> bool: ...

    def reindex(self) -> None: ...


@dataclass(frozen=True)
class ServiceContext:
    """The engine and the settings of one application.

    ``token``: the admin bearer token as bytes, or None when the admin routes are disabled.
    """

    engine: SearchEngine
    query_cap: int
    token: bytes | None


def of(request: Request) -> ServiceContext:
    """The context of the application serving ``request``."""
    return cast(ServiceContext, request.app.state.context)
