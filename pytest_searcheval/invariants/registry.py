"""The invariant registry: families of cases, the built-in ones and a project's own.

A family is a function ``make(collection, settings) -> list[InvariantCase]`` registered with
:func:`invariant`. The plugin collects every case of every enabled family as
``test_invariant[<case id>]``. A conftest adds its own the same way::

    from pytest_searcheval.invariants import InvariantCase, InvariantOutcome, invariant

    @invariant("top-result-has-title")
    def my_cases(collection, settings):
        def check(target):
            ...
            return InvariantOutcome(case_id, "top-result-has-title", "passed")
        return [InvariantCase("top-result-has-title-all", "top-result-has-title", "...", check)]

A family with ``domain="x402"`` runs only on collections of that domain
(:mod:`pytest_searcheval.domain`); the others run on any collection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_searcheval.collection.model import Collection
    from pytest_searcheval.invariants.base import InvariantCase, InvariantSettings


@dataclass(frozen=True)
class Family:
    name: str
    make: Callable[[Collection, InvariantSettings], list[InvariantCase]]
    domain: str | None = None


#: Every registered family by name, in the order their cases are collected: the one list of
#: invariant names (settings, summaries and the phase timings read it).
FAMILIES: dict[str, Family] = {}


def invariant(
    name: str, *, domain: str | None = None, before: str | None = None
) -> Callable[[Any], Any]:
    """Register ``make(collection, settings) -> list[InvariantCase]`` as invariant ``name``.

    A family is collected after those registered before it; ``before`` names a registered
    family to collect it ahead of instead. Registering a name again replaces the family in
    its place."""

    def register(make: Any) -> Any:
        family = Family(name, make, domain)
        if name in FAMILIES or before not in FAMILIES:
            FAMILIES[name] = family
            return make
        ordered = list(FAMILIES.items())
        at = [n for n, _ in ordered].index(before)
        ordered.insert(at, (name, family))
        FAMILIES.clear()
        FAMILIES.update(ordered)
        return make

    return register


def names() -> tuple[str, ...]:
    """The names of the registered families, in collection order."""
    import pytest_searcheval.invariants  # noqa: F401  (registers the built-in families)

    return tuple(FAMILIES)


def family_of(case_id: str) -> str | None:
    """The registered family a case id ``<family>-<subject>`` belongs to (the longest name
    that matches), or None."""
    found = [n for n in names() if case_id == n or case_id.startswith(n + "-")]
    return max(found, key=len) if found else None


def cases_for(collection: Collection, settings: object = None, config: Any = None) -> list[Any]:
    """Every case of every enabled family that applies to ``collection``, in a stable order."""
    import pytest_searcheval.invariants  # noqa: F401  (registers the built-in families)
    from pytest_searcheval.domain import domain_name
    from pytest_searcheval.invariants.base import settings_from

    s = settings_from(settings)
    domain = domain_name(collection)
    out: list[Any] = []
    for family in FAMILIES.values():
        if not s.runs(family.name):
            continue
        if family.domain is not None and family.domain != domain:
            continue
        out += family.make(collection, s)
    return out
