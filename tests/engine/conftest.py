"""Tests of the reference engine: every test here needs the ``engine`` extra (PostgreSQL,
pgvector, the embedding model or the HTTP service) and is marked ``slow``."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.slow)
