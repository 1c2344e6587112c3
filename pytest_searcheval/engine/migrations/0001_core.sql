-- 0001: the reference engine's tables.
-- Runs inside the run's own isolated schema: search_path is "<run schema>", "<pgvector's schema>",
-- so no object here is schema-qualified and the vector type and its operators resolve. The pgvector
-- extension itself is not created here (it is database-wide): engine/db.py creates it on the
-- embedded server and requires it on an external one.
-- {embedding_dim} is a migration parameter (default 384, the dimension of all-MiniLM-L6-v2),
-- substituted by engine/migrate.py after validating it as an integer; the checksum in schema_migrations is taken over this template text, and the value used
-- is recorded in engine_meta under 'embedding_dim'.

CREATE TABLE engine_meta (
    key   text PRIMARY KEY,
    value jsonb NOT NULL
);

CREATE TABLE documents (
    id          text PRIMARY KEY,
    title       text NOT NULL DEFAULT '',
    body        text NOT NULL DEFAULT '',
    fields      jsonb NOT NULL DEFAULT '{}'::jsonb,
    x402        jsonb,
    sidecar     jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- 'http' | 'mcp' for x402 listings, NULL for generic documents
    doc_type    text,
    liveness    text,
    settlements integer,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX documents_doc_type_idx ON documents (doc_type);

-- One row per entry of x402.accepts[]; idx is the position in that array. amount is the atomic
-- amount (up to uint256, hence numeric(78,0)); usd_rate comes from the collection's fixed price
-- snapshot and is NULL for an asset not in the registry (such an option never matches a price filter).
CREATE TABLE payment_options (
    doc_id         text NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    idx            integer NOT NULL,
    scheme         text,
    network        text,
    asset          text,
    asset_code     text,
    decimals       integer,
    amount         numeric(78, 0),
    pay_to         text,
    -- the underlying G account of a muxed M address; equals pay_to for G, NULL for C
    pay_to_account text,
    usd_rate       numeric,
    PRIMARY KEY (doc_id, idx)
);
CREATE INDEX payment_options_network_idx ON payment_options (network);
CREATE INDEX payment_options_pay_to_account_idx ON payment_options (pay_to_account);

CREATE TABLE extensions (
    doc_id text NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    name   text NOT NULL,
    PRIMARY KEY (doc_id, name)
);
CREATE INDEX extensions_name_idx ON extensions (name);

-- BM25F postings: term frequency of `term` in `field` of `doc_id`.
CREATE TABLE terms (
    doc_id text NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    field  text NOT NULL,
    term   text NOT NULL,
    tf     integer NOT NULL CHECK (tf > 0),
    PRIMARY KEY (doc_id, field, term)
);
CREATE INDEX terms_term_idx ON terms (term, field);

-- Per-field collection statistics: number of documents with the field, sum of field lengths.
CREATE TABLE field_stats (
    field     text PRIMARY KEY,
    doc_count bigint NOT NULL,
    total_len bigint NOT NULL
);

CREATE TABLE doc_lengths (
    doc_id text NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    field  text NOT NULL,
    len    integer NOT NULL,
    PRIMARY KEY (doc_id, field)
);

CREATE TABLE embeddings (
    doc_id    text PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    model     text NOT NULL,
    embedding vector({embedding_dim}) NOT NULL
);
