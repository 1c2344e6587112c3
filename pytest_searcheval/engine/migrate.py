"""Versioned SQL migrations for the engine's schema.

Files are ``engine/migrations/NNNN_name.sql``, applied in ascending ``NNNN`` order (versions must
be 1, 2, 3, ... without gaps or duplicates). Each applied migration is recorded in the table
``schema_migrations(version, name, checksum, params, applied_at)`` of the target schema, where
``checksum`` is the SHA-256 of the file text as shipped (the template, before parameters are
substituted). Re-running is idempotent: applied versions are skipped after their checksum is
compared; a changed file of an applied version is an error, never silently re-applied.

Parameters: a migration may contain ``{name}`` placeholders for the integer parameters in
:data:`DEFAULT_PARAMS` (today only ``embedding_dim``). Values are validated as positive integers
before substitution, so no text from outside ever reaches the SQL.

All migrations of one call run in a single transaction with ``search_path`` set locally to the
target schema followed by ``extra_search_path`` (the pgvector schema), so either every pending
migration is applied or none is.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import psycopg

DEFAULT_PARAMS: dict[str, int] = {"embedding_dim": 384}
# pgvector's limit for the vector type is 16000 dimensions (2000 for an HNSW index).
_PARAM_LIMITS: dict[str, tuple[int, int]] = {"embedding_dim": (1, 16000)}
MIGRATIONS_TABLE = "schema_migrations"

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_PLACEHOLDER_RE = re.compile(r"\{([a-z_]+)\}")
_CREATE_TABLE_RE = re.compile(
    r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)\b",
    re.IGNORECASE | re.MULTILINE,
)


class MigrationError(RuntimeError):
    """A migration file or the recorded migration history is inconsistent."""


@dataclass(frozen=True)
class Migration:
    """One migration file: version, name, template text and its SHA-256 checksum."""

    version: int
    name: str
    path: str
    template: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()

    def tables(self) -> list[str]:
        """Names of the tables this migration creates (``CREATE TABLE`` at the start of a line)."""
        return [
            m.group(1).lower() for m in _CREATE_TABLE_RE.finditer(_strip_comments(self.template))
        ]

    def render(self, params: Mapping[str, int]) -> str:
        def sub(match: re.Match[str]) -> str:
            key = match.group(1)
            if key not in params:
                raise MigrationError(
                    f"{self.path}: placeholder {{{key}}} has no value; "
                    f"expected one of {sorted(params)}"
                )
            return str(params[key])

        return _PLACEHOLDER_RE.sub(sub, self.template)


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


def discover(directory: str | Path | None = None) -> list[Migration]:
    """Load and order the migration files; raises :class:`MigrationError` on a malformed set."""
    found: list[Migration] = []
    if directory is None:
        root = resources.files("pytest_searcheval.engine") / "migrations"
        entries = [(e.name, e.read_text(encoding="utf-8"), str(e)) for e in root.iterdir()]
    else:
        entries = [
            (p.name, p.read_text(encoding="utf-8"), str(p))
            for p in sorted(Path(directory).iterdir())
        ]
    for name, text, path in entries:
        if not name.endswith(".sql"):
            continue
        m = _FILE_RE.match(name)
        if m is None:
            raise MigrationError(f"{path}: migration file name must look like 0001_name.sql")
        found.append(Migration(version=int(m.group(1)), name=m.group(2), path=path, template=text))
    found.sort(key=lambda mig: mig.version)
    for expected, mig in enumerate(found, start=1):
        if mig.version != expected:
            raise MigrationError(
                f"{mig.path}: migration versions must be 1, 2, 3, ... without gaps or duplicates; "
                f"expected version {expected:04d}, found {mig.version:04d}"
            )
    if not found:
        raise MigrationError(f"no migration files found in {directory or 'engine/migrations'}")
    return found


def expected_tables(migrations: Sequence[Migration] | None = None) -> set[str]:
    """Every table the migrations create, plus ``schema_migrations``."""
    migs = discover() if migrations is None else migrations
    tables = {MIGRATIONS_TABLE}
    for mig in migs:
        tables.update(mig.tables())
    return tables


def validate_params(params: Mapping[str, int] | None) -> dict[str, int]:
    """Merge ``params`` over :data:`DEFAULT_PARAMS`, checking names and integer ranges."""
    merged = dict(DEFAULT_PARAMS)
    for key, value in (params or {}).items():
        if key not in DEFAULT_PARAMS:
            raise MigrationError(
                f"unknown migration parameter {key!r}; known: {sorted(DEFAULT_PARAMS)}"
            )
        if isinstance(value, bool) or not isinstance(value, int):
            raise MigrationError(f"migration parameter {key} must be an integer, got {value!r}")
        low, high = _PARAM_LIMITS[key]
        if not low <= value <= high:
            raise MigrationError(f"migration parameter {key}={value} out of range [{low}, {high}]")
        merged[key] = value
    return merged


def migrate(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    params: Mapping[str, int] | None = None,
    extra_search_path: Sequence[str] = (),
    migrations: Sequence[Migration] | None = None,
) -> list[int]:
    """Apply pending migrations to ``schema``; return the versions applied by this call.

    The caller is responsible for ``schema`` being one it may write (see engine/isolation.py,
    which only calls this for a schema it created and marked itself).
    """
    from psycopg import sql

    migs = discover() if migrations is None else list(migrations)
    values = validate_params(params)
    path = sql.SQL(", ").join(sql.Identifier(s) for s in (schema, *extra_search_path))
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(path))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.{} (version integer PRIMARY KEY, "
                "name text NOT NULL, checksum text NOT NULL, params jsonb NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE))
        )
        # Serializes concurrent migrators of the same schema; released at commit.
        conn.execute(
            sql.SQL("LOCK TABLE {}.{} IN EXCLUSIVE MODE").format(
                sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
            )
        )
        rows = conn.execute(
            sql.SQL("SELECT version, name, checksum FROM {}.{} ORDER BY version").format(
                sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)
            )
        ).fetchall()
        done = {int(v): (str(n), str(c)) for v, n, c in rows}
        known = {m.version for m in migs}
        for version in sorted(done):
            if version not in known:
                raise MigrationError(
                    f"schema {schema} records migration {version:04d} "
                    f"({done[version][0]}) which this version of pytest-searcheval does not ship; "
                    "refusing to continue"
                )
        for mig in migs:
            if mig.version in done:
                if done[mig.version][1] != mig.checksum:
                    raise MigrationError(
                        f"{mig.path}: checksum {mig.checksum[:12]} differs from the one "
                        f"recorded in {schema}.{MIGRATIONS_TABLE} ({done[mig.version][1][:12]}); "
                        "an applied migration was edited. Add a new migration instead."
                    )
                continue
            conn.execute(mig.render(values).encode("utf-8"))
            conn.execute(
                sql.SQL(
                    "INSERT INTO {}.{} (version, name, checksum, params) VALUES (%s, %s, %s, %s)"
                ).format(sql.Identifier(schema), sql.Identifier(MIGRATIONS_TABLE)),
                (mig.version, mig.name, mig.checksum, json.dumps(values)),
            )
            applied_now.append(mig.version)
        if applied_now:
            # Each parameter is readable by the engine as engine_meta[key] (e.g. embedding_dim).
            for key, value in values.items():
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {}.engine_meta (key, value) VALUES (%s, %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
                    ).format(sql.Identifier(schema)),
                    (key, json.dumps(value)),
                )
    return applied_now
