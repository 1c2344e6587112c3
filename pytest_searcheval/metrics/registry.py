"""Measure names: the registry of definitions and the parser of names in ir_measures syntax.

A name is ``Name``, ``Name@k`` or ``Name(rel=N)@k``, as ir_measures writes them: ``nDCG@10``,
``P(rel=2)@5``, ``AP(rel=2)``, ``Bpref``. ``rel`` overrides the run's relevance level for that
one measure and is accepted only by the measures that use a relevance level (the binary ones).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from pytest_searcheval.metrics.kernels import Calc

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Compute = Callable[["Calc", "int | None"], "tuple[FloatArray, BoolArray]"]

CUTOFFS = ("required", "optional", "forbidden")


@dataclass(frozen=True)
class MeasureDef:
    """A measure of the registry: how it takes a cut-off and how it is computed.

    ``cutoff`` is ``required`` (``P@k``), ``optional`` (``AP`` or ``AP@k``) or ``forbidden``.
    ``relevance`` says whether the measure uses the relevance level, and so accepts
    ``(rel=N)``. ``compute(calc, k)`` returns the per-query values and a mask of the queries for
    which the measure is undefined (NaN outside trec-compat mode); ``calc`` is a
    :class:`~pytest_searcheval.metrics.Calc` at the measure's relevance level.
    """

    name: str
    cutoff: str
    compute: Compute
    relevance: bool = False
    aliases: tuple[str, ...] = ()


#: name -> definition; :func:`measure` adds to it (a conftest may add a measure of its own).
#: An alias (``Bpref``) maps to the same definition as its measure (``bpref``).
REGISTRY: dict[str, MeasureDef] = {}


def measure(
    name: str,
    cutoff: str = "optional",
    *,
    relevance: bool = False,
    aliases: Iterable[str] = (),
) -> Callable[[Any], Any]:
    """Register ``fn(calc, k) -> (values, undefined)`` as measure ``name``.

    ``relevance=True`` lets the name carry a relevance level, ``Name(rel=2)@k``: ``fn`` then
    receives a ``calc`` whose ``rel`` and ``num_rel`` are at that level. ``aliases`` are other
    spellings of the same measure.
    """
    if cutoff not in CUTOFFS:
        raise ValueError(f"measure {name}: cutoff must be required, optional or forbidden")
    names = (name, *aliases)
    for n in names:
        if not _NAME_RE.fullmatch(n):
            raise ValueError(f"measure {n!r}: a name is letters only, e.g. 'Hits'")

    def register(fn: Any) -> Any:
        definition = MeasureDef(name, cutoff, fn, relevance, tuple(aliases))
        for n in names:
            REGISTRY[n] = definition
        return fn

    return register


@dataclass(frozen=True, order=True)
class Measure:
    """A parsed measure name: ``name``, an optional cut-off ``k`` (None = whole ranking) and an
    optional relevance level ``rel`` (None = the run's)."""

    name: str
    k: int | None = None
    rel: int | None = None

    def __str__(self) -> str:
        level = "" if self.rel is None else f"(rel={self.rel})"
        cut = "" if self.k is None else f"@{self.k}"
        return f"{self.name}{level}{cut}"


_NAME_RE = re.compile(r"[A-Za-z]+")
_MEASURE_RE = re.compile(r"^(?P<name>[A-Za-z]+)(?:\((?P<params>[^()]*)\))?(?:@(?P<k>[^@()]*))?$")
_INT_RE = re.compile(r"[+-]?\d+")


def known_names() -> str:
    """The accepted forms, for error messages: ``nDCG, nDCG@k, P@k, ...``."""
    seen: dict[str, MeasureDef] = {}
    for d in REGISTRY.values():
        seen.setdefault(d.name, d)
    forms = []
    for n, d in seen.items():
        form = {"forbidden": n, "required": f"{n}@k"}.get(d.cutoff, f"{n}, {n}@k")
        forms.append(form + (f" (also {', '.join(d.aliases)})" if d.aliases else ""))
    binary = [n for n, d in seen.items() if d.relevance]
    return f"{', '.join(forms)}; with a relevance level, e.g. P(rel=2)@5: {', '.join(binary)}"


def _parse_level(text: str, name: str, params: str) -> int:
    if not params.strip():
        raise ValueError(f"measure {text!r}: empty parameter list; expected rel=N")
    levels: list[int] = []
    for part in params.split(","):
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or key != "rel":
            raise ValueError(
                f"measure {text!r}: unknown parameter {part.strip()!r}; "
                f"expected rel=N, as in {name}(rel=2)"
            )
        if levels:
            raise ValueError(f"measure {text!r}: rel is given twice")
        if not _INT_RE.fullmatch(value):
            raise ValueError(f"measure {text!r}: rel {value!r} is not an integer")
        if int(value) <= 0:
            raise ValueError(f"measure {text!r}: rel must be a positive integer, got {value}")
        levels.append(int(value))
    return levels[0]


def parse_measure(text: str | Measure) -> Measure:
    """Parse ``"nDCG@10"`` into ``Measure("nDCG", 10)`` and ``"P(rel=2)@5"`` into
    ``Measure("P", 5, rel=2)``; an alias resolves to its measure (``"Bpref"`` to ``bpref``).
    ValueError names the bad measure and what was expected."""
    if isinstance(text, Measure):
        return text
    if not isinstance(text, str):
        raise ValueError(f"measure {text!r}: expected a string such as 'nDCG@10'")
    m = _MEASURE_RE.match(text.strip())
    if m is None or m.group("name") not in REGISTRY:
        raise ValueError(f"measure {text!r}: unknown measure; expected one of {known_names()}")
    definition = REGISTRY[m.group("name")]
    name = definition.name
    params = m.group("params")
    rel: int | None = None
    if params is not None:
        if not definition.relevance:
            raise ValueError(
                f"measure {text!r}: {name} takes no relevance level (rel=N is for "
                f"{', '.join(sorted({d.name for d in REGISTRY.values() if d.relevance}))})"
            )
        rel = _parse_level(text, name, params)
    raw_k = m.group("k")
    if raw_k is None:
        if definition.cutoff == "required":
            raise ValueError(f"measure {text!r}: {name} needs a cut-off, e.g. {name}@10")
        return Measure(name, None, rel)
    if definition.cutoff == "forbidden":
        raise ValueError(f"measure {text!r}: {name} takes no cut-off")
    if not _INT_RE.fullmatch(raw_k):
        raise ValueError(f"measure {text!r}: cut-off {raw_k!r} is not an integer")
    k = int(raw_k)
    if k <= 0:
        raise ValueError(f"measure {text!r}: cut-off must be a positive integer, got {k}")
    return Measure(name, k, rel)


def label(text: str | Measure) -> str:
    """The key a measure's values are reported under: the name as the caller spelled it
    (``Bpref`` stays ``Bpref``), without surrounding blanks; a :class:`Measure` by its
    canonical spelling."""
    return text.strip() if isinstance(text, str) else str(text)


def with_depth(text: str, depth: int | None) -> str:
    """``text`` cut at ``depth`` when it names a measure that may take a cut-off and has none
    (``AP(rel=2)`` -> ``AP(rel=2)@20``); anything else, unknown names included, unchanged."""
    if depth is None:
        return text
    try:
        parsed = parse_measure(text)
    except ValueError:
        return text
    if parsed.k is not None or REGISTRY[parsed.name].cutoff == "forbidden":
        return text
    return f"{label(text)}@{depth}"
