"""Root conftest of the pytest-searcheval repository.

In this repository ``pytest --search-eval`` means "evaluate the shipped collection": the
project's own test suite (``tests/``, the default ``testpaths``) runs without the flag. Naming a
path on the command line still collects it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

_TESTS = Path(__file__).parent / "tests"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if (
        config.getoption("search_eval", default=False)
        and config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and (collection_path == _TESTS or _TESTS in collection_path.parents)
    ):
        return True
    return None
