"""Every use of pytest's private API by the plugin, in one place.

The generated tests are built by the thousand, so two internals are worth their risk: sharing
one resolved fixture closure among the items of a kind (``Function``'s ``fixtureinfo``
argument and ``_fixtureinfo`` attribute, cached on the collector), and the structured node id
of pytest 9.2+ (``_pytest.nodeid``), without which ``--lf`` does not find a generated test
again there. A third, ``_pytest.runner.runtestprotocol`` without logging, lets an invariant
case that a family's one skip stands for pass through setup and teardown unreported. Each
falls back to what public pytest does when an internal is missing, and
tests/plugin/test_compat.py holds them to the floor pytest (8.4) and the newest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=pytest.Function)

_CACHE_ATTR = "_searcheval_fixtureinfo"


def function_item(
    cls: type[F], parent: pytest.Collector, *, name: str, callobj: Callable[..., Any]
) -> F:
    """``cls.from_parent(parent, name=..., callobj=...)``, resolving the fixture closure once per
    (parent, item class) instead of once per item: every item of a kind shares its function."""
    cache: dict[type, Any] = parent.__dict__.setdefault(_CACHE_ATTR, {})
    info = cache.get(cls)
    item = cls.from_parent(parent, name=name, callobj=callobj, fixtureinfo=info)
    if info is None:
        cache[cls] = getattr(item, "_fixtureinfo", None)
    return item


def parametrized_node_id(item: pytest.Item) -> None:
    """Give a generated test the node id a parametrized test has (``name[params]`` split into
    its name and its parameters), so that pytest's --lf/--ff cache, which stores node ids as
    text, finds it again. pytest versions without structured node ids need nothing."""
    try:
        from _pytest.nodeid import coerce_node_id  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # pytest < 9.2 (_pytest.nodeid is new in 9.2)
        return
    if hasattr(item, "_id"):
        item._id = coerce_node_id(item.nodeid)


def run_unreported(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Set ``item`` up, run and tear it down as pytest's protocol does (fixtures kept or
    finished for ``nextitem``), reporting nothing: for a generated test that stands for no
    check. Public pytest has no protocol without reports; without the internal, ``False``
    (the item then runs and reports as any test)."""
    try:
        from _pytest.runner import runtestprotocol
    except ImportError:  # pragma: no cover - present from pytest 2 to 9
        return False
    runtestprotocol(item, log=False, nextitem=nextitem)
    return True
