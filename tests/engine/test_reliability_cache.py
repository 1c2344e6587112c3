"""The embedding cache is verified, not trusted (point 6 of the issue "Reliability: stop cleanly,
reindex atomically, never 500, never trust a bad cache").

The encoder here is a deterministic stand-in (unit vectors from a hash of the text), so the
tests exercise the cache's own checks in milliseconds; the real model's path still gives the
model identity and dimension.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from embedding_doubles import HashEmbedder

from pytest_searcheval.engine.embed import EmbeddingCacheWarning, Vector

TEXTS = ["weather forecast API", "currency exchange rates", "image captioning MCP tool"]


def _rows(cache: Path) -> list[tuple[str, bytes]]:
    with sqlite3.connect(cache / "embeddings.sqlite") as db:
        return [(str(k), bytes(v)) for k, v in db.execute("SELECT key, vec FROM vectors_v2")]


def _write(cache: Path, sql: str, params: tuple[object, ...]) -> None:
    db = sqlite3.connect(cache / "embeddings.sqlite")
    with db:
        db.execute(sql, params)
    db.close()


def _filled(cache: Path) -> list[Vector | None]:
    emb = HashEmbedder(cache_dir=cache)
    vectors = emb.embed(TEXTS)
    emb.close()
    return vectors


def test_a_clean_cache_is_read_without_encoding(tmp_path: Path) -> None:
    first = _filled(tmp_path)
    emb = HashEmbedder(cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = emb.embed(TEXTS)
    assert emb.encoded == 0 and emb.stats.cache_hits == 3 and emb.stats.rejected == 0
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "damage",
    ["same-length bytes changed", "truncated", "wrong dimension", "checksum removed", "NaN"],
)
def test_a_damaged_entry_is_re_encoded_with_a_warning_never_used(
    tmp_path: Path, damage: str
) -> None:
    first = _filled(tmp_path)
    key, blob = _rows(tmp_path)[0]
    arr = np.frombuffer(blob, dtype="<f4").copy()
    if damage == "same-length bytes changed":  # a right-length vector: the silent case
        _write(tmp_path, "UPDATE vectors_v2 SET vec = ? WHERE key = ?", (arr[::-1].tobytes(), key))
    elif damage == "truncated":
        _write(tmp_path, "UPDATE vectors_v2 SET vec = ? WHERE key = ?", (blob[:100], key))
    elif damage == "wrong dimension":
        _write(tmp_path, "UPDATE vectors_v2 SET dim = 12 WHERE key = ?", (key,))
    elif damage == "checksum removed":
        _write(tmp_path, "UPDATE vectors_v2 SET checksum = NULL WHERE key = ?", (key,))
    else:
        arr[0] = np.nan
        _write(tmp_path, "UPDATE vectors_v2 SET vec = ? WHERE key = ?", (arr.tobytes(), key))
    emb = HashEmbedder(cache_dir=tmp_path)
    with pytest.warns(EmbeddingCacheWarning, match="1 entries failed verification"):
        again = emb.embed(TEXTS)
    assert emb.encoded == 1 and emb.stats.rejected == 1
    assert emb.cache_info()["rejected"] == 1
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))  # type: ignore[arg-type]
    emb.close()
    # the re-encoded vector replaced the bad row: the next run trusts the cache again
    third = HashEmbedder(cache_dir=tmp_path)
    third.embed(TEXTS)
    assert third.encoded == 0 and third.stats.rejected == 0


def test_a_row_moved_to_another_text_is_caught(tmp_path: Path) -> None:
    _filled(tmp_path)
    (k1, _), (k2, _) = _rows(tmp_path)[:2]
    _write(tmp_path, "DELETE FROM vectors_v2 WHERE key = ?", (k2,))
    # a valid row of text 1, copied under text 2's key with text 1's checksum
    _write(
        tmp_path,
        "INSERT INTO vectors_v2 SELECT model, revision, ?, dim, vec, checksum FROM vectors_v2"
        " WHERE key = ?",
        (k2, k1),
    )
    emb = HashEmbedder(cache_dir=tmp_path)
    with pytest.warns(EmbeddingCacheWarning, match="checksum mismatch"):
        emb.embed(TEXTS)
    assert emb.encoded == 1


def test_a_file_that_is_not_a_database_is_moved_aside(tmp_path: Path) -> None:
    (tmp_path / "embeddings.sqlite").write_bytes(b"not a database\n" * 100)
    with pytest.warns(EmbeddingCacheWarning, match="not a usable database"):
        emb = HashEmbedder(cache_dir=tmp_path)
    emb.embed(TEXTS)
    assert emb.cache_mode == "read-write"
    assert [p.name for p in tmp_path.glob("embeddings.sqlite.corrupt-*")]


def test_a_cache_that_cannot_be_created_is_a_clear_message(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.warns(EmbeddingCacheWarning, match="cannot be written") as seen:
        emb = HashEmbedder(cache_dir=blocker / "cache")
    assert str(blocker / "cache" / "embeddings.sqlite") in str(seen[0].message)
    assert emb.cache_mode == "memory"
    emb.embed(TEXTS)
    emb.embed(TEXTS)
    assert emb.encoded == 3  # the second call is served by the process, nothing is stored


_READ_ONLY_CHILD = """
import json, sys, warnings
from pathlib import Path
sys.path[:0] = sys.argv[2].split(":")
from embedding_doubles import HashEmbedder
from test_reliability_cache import TEXTS
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    emb = HashEmbedder(cache_dir=Path(sys.argv[1]))
    emb.embed(TEXTS + ["a text that is not cached"])
print(json.dumps({"mode": emb.cache_mode, "encoded": emb.encoded,
                  "hits": emb.stats.cache_hits, "warnings": [str(w.message) for w in caught]}))
"""


def _read_only_command(cache: Path, child: list[str]) -> list[str]:
    """The child command, run where ``cache`` cannot be written: a read-only bind mount in a
    private mount namespace for root (whom permission bits do not stop), chmod otherwise."""
    if os.geteuid() != 0:
        cache.chmod(0o555)
        for path in cache.iterdir():
            path.chmod(0o444)
        return child
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"root without mount namespaces cannot make a read-only directory: {probe}")
    quoted = " ".join(f"'{a}'" for a in child)
    d = f"'{cache}'"
    return [
        "unshare",
        "-m",
        "sh",
        "-c",
        f"mount --bind {d} {d} && mount -o remount,bind,ro {d} {d} && exec {quoted}",
    ]


def test_a_read_only_cache_directory_is_used_read_only(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _filled(cache)
    before = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    child = [sys.executable, "-c", _READ_ONLY_CHILD, str(cache), str(Path(__file__).parent)]
    child[-1] += os.pathsep + str(Path(__file__).parents[1])
    try:
        out = subprocess.run(
            _read_only_command(cache, child),
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            check=False,
        )
    finally:
        cache.chmod(0o755)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["mode"] == "read-only"
    assert result["hits"] == 3 and result["encoded"] == 1  # cached rows used, the miss encoded
    assert any("read-only" in w or "cannot be written" in w for w in result["warnings"])
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == before
