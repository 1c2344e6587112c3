"""docs/assertions.md runs as written: its files are written into an empty project in the order
the page gives them, each console command is run there, and the lines the page shows under a
command must appear in its output, in that order. ``file=`` writes a file, ``append=`` adds to
one, ``check=`` is a file the runs must have written with exactly that text."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "assertions.md"
BLOCK = re.compile(r"^```(\w+)(?: (file|append|check)=(\S+))?\n(.*?)^```$", re.M | re.S)


@pytest.fixture(autouse=True)
def _not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # A CI run fails on a snapshot never recorded; these runs record their first snapshots.
    for variable in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(variable, raising=False)


def steps(text: str) -> list[tuple[str, str, str]]:
    """(action, target, body) in page order: file / append / check / run."""
    out: list[tuple[str, str, str]] = []
    for lang, action, target, body in BLOCK.findall(text):
        if action:
            out.append((action, target, body))
        elif lang == "console":
            command: str | None = None
            expected: list[str] = []
            for line in body.splitlines():
                if line.startswith("$ "):
                    if command is not None:
                        out.append(("run", command, "\n".join(expected)))
                    command, expected = line[2:], []
                else:
                    expected.append(line)
            if command is not None:
                out.append(("run", command, "\n".join(expected)))
    return out


def test_the_page_has_files_commands_and_checks() -> None:
    actions = [a for a, _, _ in steps(PAGE.read_text(encoding="utf-8"))]
    assert {"file", "append", "check", "run"} <= set(actions)
    assert actions.count("run") >= 4


@pytest.mark.slow  # each command is a fresh pytest process, as the reader's is
def test_the_examples_run_as_the_page_says(pytester: pytest.Pytester) -> None:
    for action, target, body in steps(PAGE.read_text(encoding="utf-8")):
        path = pytester.path / target
        if action == "file":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
        elif action == "append":
            with path.open("a", encoding="utf-8") as handle:
                handle.write(body)
        elif action == "check":
            assert path.read_text(encoding="utf-8") == body, target
        else:
            args = shlex.split(target)
            assert args[0] == "pytest", target
            result = pytester.runpytest_subprocess(*args[1:])
            # fnmatch reads "[" as a class; the page's lines are literal but for "*"
            patterns = [line.replace("[", "[[]") for line in body.splitlines() if line]
            try:
                result.stdout.fnmatch_lines(patterns)
            except pytest.fail.Exception:
                raise AssertionError(f"$ {target}\n{result.stdout.str()[-4000:]}") from None
