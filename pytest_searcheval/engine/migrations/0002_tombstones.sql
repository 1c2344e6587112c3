-- 0002: deletes are tombstones until the next re-index.
-- A deleted listing keeps its rows (postings, lengths, embedding, payment options) so that corpus
-- statistics (N, df, average field lengths) and the candidate ranks of every other listing stay
-- exactly as they were; the engine removes tombstoned ids from every result after fusion, at once.
-- Engine.reindex() purges tombstoned rows and recomputes the statistics (as Lucene drops deleted
-- documents from its statistics only when segments merge).
ALTER TABLE documents ADD COLUMN deleted_at timestamptz;
CREATE INDEX documents_deleted_idx ON documents (id) WHERE deleted_at IS NOT NULL;
