"""The one output writer: a regular file is replaced atomically, a special file written into."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from pytest_searcheval.files import atomic_writer, write_atomic


def test_a_regular_file_is_replaced_and_no_temporary_is_left(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.json"
    write_atomic(target, "one")
    write_atomic(target, "two\n")
    assert target.read_bytes() == b"two\n"
    assert os.listdir(target.parent) == ["report.json"]


def test_an_error_while_writing_leaves_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "judgments.tsv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError, match="half way"), atomic_writer(target) as handle:
        handle.write("new first half\n")
        handle.flush()
        raise RuntimeError("half way")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["judgments.tsv"]


def test_a_failing_replace_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")

    def broken(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.json"]


def test_the_new_file_has_ordinary_permissions(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        write_atomic(tmp_path / "r.json", "{}")
    finally:
        os.umask(umask)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644


def test_dev_null_stays_a_character_device() -> None:
    null = Path("/dev/null")
    if not stat.S_ISCHR(null.stat().st_mode):
        pytest.skip("/dev/null is not a character device on this machine to begin with")
    try:
        write_atomic(null, "discarded\n")
        with atomic_writer(null) as handle:
            handle.write("also discarded\n")
        assert stat.S_ISCHR(null.stat().st_mode)
    finally:
        # A writer that replaced it would break every later process on the machine: put it back.
        if not stat.S_ISCHR(null.lstat().st_mode) and os.geteuid() == 0:
            null.unlink()
            os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            os.chmod(null, 0o666)


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as reader:
            received.append(reader.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    with atomic_writer(fifo) as handle:
        handle.write("q1 Q0 d1 1 2.0 run\n")
    reader.join(timeout=10)
    assert received == [b"q1 Q0 d1 1 2.0 run\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert os.listdir(tmp_path) == ["pipe"]


def test_no_other_module_of_the_package_replaces_files_itself() -> None:
    # One writer: a module with its own temp-file-and-os.replace is a copy that drifts (the
    # special-file case was once fixed in one copy and not the others). embed.py moves a
    # corrupt cache aside, which is a rename, not a write.
    import ast

    package = Path(__file__).resolve().parents[2] / "pytest_searcheval"
    allowed = {package / "files.py", package / "engine" / "embed.py"}
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("replace", "rename")
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and path not in allowed
            ):
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == []
