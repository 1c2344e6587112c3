"""The reference search engine: embedded PostgreSQL + pgvector, isolation, migrations, ranking.

Kept import-light on purpose: importing ``pytest_searcheval.engine`` must not import psycopg,
torch or sentence-transformers; import the submodules (``engine.db``, ``engine.isolation``,
``engine.core``) where they are needed.
"""

from __future__ import annotations
