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
(:mod:`pytest_searcheval.domain`); the others run on any collection. A domain's own families
register when the domain is loaded (the x402 ones from :mod:`pytest_searcheval.x402.invariants`,
imported by :mod:`pytest_searcheval.x402.domain`), so :func:`cases_for` loads the collection's
domain before it reads the registry.
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
    name: str, *, domain: str | None = None, before: str | None = None, after: str | None = None
) -> Callable[[Any], Any]:
    """Register ``make(collection, settings) -> list[InvariantCase]`` as invariant ``name``.

    A family is collected after those registered before it; ``before`` or ``after`` names a
    registered family to collect it next to instead (a domain's families take their place
    among the generic ones). Registering a name again replaces the family in its place."""

    def register(make: Any) -> Any:
        family = Family(name, make, domain)
        anchor = before if before in FAMILIES else after if after in FAMILIES else None
        if name in FAMILIES or anchor is None:
            FAMILIES[name] = family
            return make
        ordered = list(FAMILIES.items())
        at = [n for n, _ in ordered].index(anchor) + (anchor == after)
        ordered.insert(at, (name, family))
        FAMILIES.clear()
        FAMILIES.update(ordered)
        return make

    return register


def names(*, every_domain: bool = False) -> tuple[str, ...]:
    """The names of the registered families, in collection order. A domain registers its
    families when it is loaded; ``every_domain`` loads every registered domain first."""
    import pytest_searcheval.invariants  # noqa: F401  (registers the generic families)

    if every_domain:
        from pytest_searcheval import domain

        for known in domain.known():
            domain.get(known)
    return tuple(FAMILIES)


def family_of(case_id: str) -> str | None:
    """The registered family a case id ``<family>-<subject>`` belongs to (the longest name
    that matches; the domains are loaded when no loaded family matches), or None."""
    for every_domain in (False, True):
        found = [
            n
            for n in names(every_domain=every_domain)
            if case_id == n or case_id.startswith(n + "-")
        ]
        if found:
            return max(found, key=len)
    return None


def cases_for(collection: Collection, settings: object = None, config: Any = None) -> list[Any]:
    """Every case of every enabled family that applies to ``collection``, in a stable order."""
    import pytest_searcheval.invariants  # noqa: F401  (registers the generic families)
    from pytest_searcheval.domain import domain_name, get
    from pytest_searcheval.invariants.base import settings_from

    s = settings_from(settings)
    domain = domain_name(collection)
    if domain is not None:
        get(domain)  # loading a domain registers its families
    out: list[Any] = []
    for family in FAMILIES.values():
        if not s.runs(family.name):
            continue
        if family.domain is not None and family.domain != domain:
            continue
        out += family.make(collection, s)
    return out
