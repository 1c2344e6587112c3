"""Limits every value of a document record must respect, wherever the record comes from.

A corpus line (collection/native.py) and the body of ``PUT /admin/resources/{id}`` (the
engine's HTTP API) go through the same check, so a record that ``collection check`` accepts is
one the engine can store, and a record the API refuses is named by field. What PostgreSQL or
the engine could not hold is refused here:

- numbers: finite (no NaN, Infinity, or 1e400, which JSON parsers turn into infinity); integers
  within 64 bits (``MAX_INTEGER``);
- strings (keys too): valid Unicode (no lone surrogate such as ``"\\ud800"``), no NUL character
  (PostgreSQL ``text`` and ``jsonb`` cannot hold one);
- shape: nesting at most ``MAX_DEPTH`` containers deep, at most ``MAX_VALUES`` values in all;
- the id: at most ``MAX_ID_CHARS`` characters.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

__all__ = ["MAX_DEPTH", "MAX_ID_CHARS", "MAX_INTEGER", "MAX_VALUES", "value_problems"]

MAX_DEPTH = 32
MAX_VALUES = 100_000
MAX_ID_CHARS = 256
MAX_INTEGER = 2**63 - 1
#: problems reported per record; the rest of a broken record says nothing new
_MAX_REPORTED = 20


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (PostgreSQL text cannot hold it)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"not valid Unicode: lone surrogate {text[exc.start]!r} at character"
                f" {exc.start + 1}"
            )
    return None


def _path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def value_problems(record: Any, root: str = "") -> Iterator[tuple[str, str]]:
    """(field, what is wrong) for every value of ``record`` outside the limits above.

    Iterative (a record nested a thousand deep cannot exhaust the stack); stops after the
    first few problems and at the first container past ``MAX_DEPTH``.
    """
    reported = 0
    seen = 0
    stack: list[tuple[str, Any, int]] = [(root, record, 0)]
    while stack:
        field, value, depth = stack.pop()
        seen += 1
        problem: str | None = None
        if seen > MAX_VALUES:
            yield root or "record", f"more than {MAX_VALUES} values in one record"
            return
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str):
            problem = _string_problem(value)
        elif isinstance(value, int):
            if not -MAX_INTEGER - 1 <= value <= MAX_INTEGER:
                problem = (
                    f"integer out of range: expected at most 64 bits ({len(str(value))} digits)"
                )
        elif isinstance(value, float):
            if not math.isfinite(value):
                problem = f"expected a finite number, got {value!r}"
        elif isinstance(value, (dict, list)):
            if depth >= MAX_DEPTH:
                yield field or "record", f"nested deeper than {MAX_DEPTH} levels"
                return
            if isinstance(value, dict):
                for key, child in value.items():
                    key_text = str(key)
                    bad_key = _string_problem(key_text)
                    shown = key_text if bad_key is None else repr(key_text[:40])
                    if bad_key is not None:
                        yield _path(field, shown), f"key {bad_key}"
                        reported += 1
                        continue
                    stack.append((_path(field, key_text), child, depth + 1))
            else:
                stack.extend((_path(field, i), child, depth + 1) for i, child in enumerate(value))
        else:
            problem = f"expected a JSON value, got {type(value).__name__}"
        if problem is not None:
            yield field or "record", problem
            reported += 1
        if reported >= _MAX_REPORTED:
            return
