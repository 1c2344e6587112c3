"""Defensive readers for collection files: stream lines with a length cap, decode UTF-8 line by
line, parse JSON Lines, TSV and YAML, and turn every failure into a ``Problem`` with file and
line instead of a traceback. Nothing here slurps a line-oriented file, so a 1 GB corpus costs
memory proportional to its records, not to the file twice over."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from pytest_searcheval.collection.model import CollectionError, Problem
from pytest_searcheval.collection.records import MAX_DEPTH

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_YAML_BYTES",
    "InputRefused",
    "Problems",
    "YamlItem",
    "iter_jsonl",
    "iter_jsonl_at",
    "iter_lines",
    "iter_lines_at",
    "open_regular",
    "read_yaml",
    "yaml_items",
]

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_YAML_BYTES = 64 * 1024 * 1024
#: a line-oriented file (JSONL, TSV, TREC) is streamed, so this bounds time, not memory
DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024 * 1024
#: YAML aliases may make the document at most this many times larger than its text says ...
YAML_ALIAS_FACTOR = 4
#: ... plus this many nodes (a few anchors reused in a small file are fine)
YAML_ALIAS_ALLOWANCE = 10_000
# A file with this many problems is not the expected format at all; reading the rest of it
# (possibly a gigabyte) would only produce more of the same.
MAX_PROBLEMS_PER_FILE = 1000
_CHUNK = 1024 * 1024


@dataclass
class Problems:
    """Collects problems; keeps the first ``limit`` and counts the rest, so that a garbage
    gigabyte does not build a gigabyte of messages."""

    limit: int = 10_000
    items: list[Problem] = field(default_factory=list)
    dropped: int = 0
    per_file: dict[str, int] = field(default_factory=dict)

    def add(self, file: str, line: int | None, field_: str | None, message: str) -> None:
        self.per_file[file] = self.per_file.get(file, 0) + 1
        if len(self.items) < self.limit:
            self.items.append(Problem(file, line, field_, message))
        else:
            self.dropped += 1

    def __bool__(self) -> bool:
        return bool(self.items) or self.dropped > 0

    def __len__(self) -> int:
        return len(self.items) + self.dropped

    def raise_if_any(self) -> None:
        if self:
            raise CollectionError(self.items, truncated=self.dropped)


class InputRefused(OSError):
    """A file the readers will not read (not a regular file, or over its size limit)."""


_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def open_regular(path: Path, max_bytes: int) -> tuple[BinaryIO, int]:
    """Open ``path`` for reading only if it is a regular file of at most ``max_bytes``.

    The check is made on the opened descriptor (a symlink is followed to what it names, and the
    file cannot be swapped between check and read). O_NONBLOCK keeps the open itself from
    waiting on a FIFO with no writer. Raises :class:`InputRefused` saying what the file is.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((what for test, what in _KINDS if test(st.st_mode)), "not a regular file")
            raise InputRefused(f"is {kind}: expected a regular file")
        if st.st_size > max_bytes:
            raise InputRefused(
                f"file is {st.st_size} bytes, larger than the limit of {max_bytes} bytes"
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def display(path: Path, root: Path | None) -> str:
    """Path as shown in messages: relative to the collection root when inside it."""
    if root is not None:
        try:
            return path.relative_to(root).as_posix()
        except ValueError:
            pass
    return str(path)


def iter_lines(
    path: Path,
    problems: Problems,
    name: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, text without line ending) for each line that decodes.

    Lines longer than ``max_line_bytes`` and lines that are not UTF-8 are reported and skipped
    (the caller fails the load at the end); a UTF-8 byte order mark on line 1 is ignored. A
    file that is not a regular file (a device, a FIFO, a symlink to one) or is larger than
    ``max_file_bytes`` is refused before a byte is read.
    """
    for number, text, _, _ in iter_lines_at(
        path, problems, name, max_line_bytes=max_line_bytes, max_file_bytes=max_file_bytes
    ):
        yield number, text


def iter_lines_at(
    path: Path,
    problems: Problems,
    name: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> Iterator[tuple[int, str, int, bytes]]:
    """:func:`iter_lines` with where each line is: (number, text, byte offset of the line's
    start, the line's bytes as read, line ending and any byte order mark included)."""
    try:
        fh, _ = open_regular(path, max_file_bytes)
    except InputRefused as exc:
        problems.add(name, None, None, str(exc))
        return
    except OSError as exc:
        problems.add(name, None, None, f"cannot open: {exc.strerror or exc}")
        return
    with fh:
        number = 0
        offset = 0
        per_file = problems.per_file
        while True:
            if per_file.get(name, 0) >= MAX_PROBLEMS_PER_FILE:
                problems.add(
                    name,
                    number,
                    None,
                    f"stopped reading after {MAX_PROBLEMS_PER_FILE} problems in this file",
                )
                return
            try:
                raw = fh.readline(max_line_bytes + 1)
            except OSError as exc:
                problems.add(name, number + 1, None, f"read error: {exc.strerror or exc}")
                return
            if not raw:
                return
            number += 1
            start = offset
            offset += len(raw)
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                skipped = len(raw)
                while True:
                    rest = fh.readline(_CHUNK)
                    skipped += len(rest)
                    if not rest or rest.endswith(b"\n"):
                        break
                offset = start + skipped
                problems.add(
                    name,
                    number,
                    None,
                    f"line is {skipped} bytes, longer than the limit of {max_line_bytes} bytes"
                    " (one record per line expected; raise max_line_bytes if this is intended)",
                )
                continue
            body = raw[3:] if number == 1 and raw.startswith(b"\xef\xbb\xbf") else raw
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.add(
                    name,
                    number,
                    None,
                    f"not valid UTF-8 (byte {body[exc.start]:#04x} at column {exc.start + 1}):"
                    " expected UTF-8 text",
                )
                continue
            yield number, text.rstrip("\r\n"), start, raw


def iter_jsonl(
    path: Path,
    problems: Problems,
    name: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line, object) for every line holding a JSON object; blank lines are skipped."""
    for number, value, _, _ in iter_jsonl_at(path, problems, name, max_line_bytes=max_line_bytes):
        yield number, value


def iter_jsonl_at(
    path: Path,
    problems: Problems,
    name: str,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[tuple[int, dict[str, Any], int, bytes]]:
    """:func:`iter_jsonl` with where each object is: (line, object, byte offset of the line's
    start, the line's bytes as read)."""
    loads = json.loads
    for number, text, offset, raw in iter_lines_at(
        path, problems, name, max_line_bytes=max_line_bytes
    ):
        if not text or text.isspace():
            continue
        try:
            value = loads(text)
        except RecursionError:
            # The decoder recurses per array or object: about 1,000 levels end the interpreter's
            # stack long before the record check (MAX_DEPTH) could name the field.
            problems.add(
                name,
                number,
                None,
                f"malformed JSON: nested too deeply to parse (a record nests at most"
                f" {MAX_DEPTH} levels of arrays and objects)",
            )
            continue
        except ValueError as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            col = exc.colno if isinstance(exc, json.JSONDecodeError) else None
            where = f" at column {col}" if col else ""
            problems.add(name, number, None, f"malformed JSON{where}: {msg}")
            continue
        if not isinstance(value, dict):
            problems.add(name, number, None, f"expected a JSON object, got {type(value).__name__}")
            continue
        yield number, value, offset, raw


@dataclass(frozen=True, slots=True)
class YamlItem:
    """One element of a top-level YAML sequence with the lines of its keys."""

    value: Any
    line: int
    key_lines: dict[str, int]


def read_yaml(
    path: Path,
    problems: Problems,
    name: str,
    *,
    max_bytes: int = DEFAULT_MAX_YAML_BYTES,
) -> yaml.Node | None:
    """Parse a YAML file into a node tree (positions kept); None after reporting a problem.

    Refused before parsing: anything but a regular file, a file over ``max_bytes``. Refused
    after composing, before any value is built: recursive aliases, and aliases that would make
    the document more than ``YAML_ALIAS_FACTOR`` times its own node count plus
    ``YAML_ALIAS_ALLOWANCE`` (an "alias bomb": a few hundred bytes that expand exponentially).
    """
    try:
        fh, _ = open_regular(path, max_bytes)
    except InputRefused as exc:
        problems.add(name, None, None, f"{exc} (YAML files)")
        return None
    except OSError as exc:
        problems.add(name, None, None, f"cannot open: {exc.strerror or exc}")
        return None
    try:
        with fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        problems.add(name, None, None, f"cannot read: {exc.strerror or exc}")
        return None
    if len(data) > max_bytes:  # grew while being read
        problems.add(name, None, None, f"file is larger than the YAML limit of {max_bytes} bytes")
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        problems.add(name, line, None, "not valid UTF-8: expected UTF-8 text")
        return None
    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_cls(text)
    try:
        node: yaml.Node | None = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = mark.line + 1 if mark is not None else None
        problems.add(name, at, None, f"malformed YAML: {exc.problem or exc}")
        return None
    except yaml.YAMLError as exc:
        problems.add(name, None, None, f"malformed YAML: {exc}")
        return None
    finally:
        loader.dispose()
    alias_problem = _alias_problem(node)
    if alias_problem is not None:
        problems.add(name, alias_problem[0], None, alias_problem[1])
        return None
    _check_duplicate_keys(node, problems, name)
    return node


def _alias_problem(node: yaml.Node | None) -> tuple[int | None, str] | None:
    """(line, message) when aliases make ``node`` recursive or expand it past the limit.

    The composer returns an alias as the very node it names, so the tree is a graph: the
    expanded size of a node is 1 + the expanded sizes of its children, counted once per node
    (memoised), in time proportional to the distinct nodes.
    """
    if node is None:
        return None
    expanded: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, done = stack.pop()
        key = id(current)
        children = _children(current)
        if done:
            on_path.discard(key)
            expanded[key] = 1 + sum(expanded[id(c)] for c in children)
            continue
        if key in expanded:
            continue
        on_path.add(key)
        stack.append((current, True))
        for child in children:
            if id(child) in on_path:
                return (
                    child.start_mark.line + 1,
                    "recursive YAML alias: an anchor used inside itself",
                )
            if id(child) not in expanded:
                stack.append((child, False))
    distinct = len(expanded)
    total = expanded[id(node)]
    limit = YAML_ALIAS_FACTOR * distinct + YAML_ALIAS_ALLOWANCE
    if total > limit:
        return None, (
            f"YAML aliases expand {distinct} nodes to {total}, more than the limit of {limit}"
            f" ({YAML_ALIAS_FACTOR} x the nodes + {YAML_ALIAS_ALLOWANCE}): expected plain data"
        )
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_duplicate_keys(node: yaml.Node | None, problems: Problems, name: str) -> None:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, yaml.MappingNode):
            seen: dict[str, int] = {}
            for k, v in n.value:
                if isinstance(k, yaml.ScalarNode):
                    if k.value in seen:
                        problems.add(
                            name,
                            k.start_mark.line + 1,
                            str(k.value),
                            f"duplicate key (first on line {seen[k.value]})",
                        )
                    else:
                        seen[k.value] = k.start_mark.line + 1
                stack.append(v)
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)


def construct(node: yaml.Node, problems: Problems, name: str) -> Any:
    """Build Python values from a node (safe constructors only)."""
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problems.add(name, mark.line + 1 if mark else None, None, f"invalid YAML value: {exc}")
        return None
    finally:
        loader.dispose()


def yaml_items(node: yaml.Node | None, problems: Problems, name: str, what: str) -> list[YamlItem]:
    """The elements of a top-level YAML list, each with its line and its keys' lines."""
    if node is None:
        return []
    if not isinstance(node, yaml.SequenceNode):
        problems.add(name, node.start_mark.line + 1, None, f"expected a YAML list of {what}")
        return []
    value = construct(node, problems, name)
    if not isinstance(value, list):
        return []
    items: list[YamlItem] = []
    for child, v in zip(node.value, value, strict=True):
        key_lines: dict[str, int] = {}
        if isinstance(child, yaml.MappingNode):
            for k, _ in child.value:
                if isinstance(k, yaml.ScalarNode):
                    key_lines[str(k.value)] = k.start_mark.line + 1
        items.append(YamlItem(v, child.start_mark.line + 1, key_lines))
    return items


def key_lines_of(node: yaml.Node | None) -> dict[str, int]:
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {
        str(k.value): k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)
    }
