-- Settings that belong to the whole organisation (the org-wide stop,
-- autonomy overrides) and a counter table the store's own tests use.
CREATE TABLE kv (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
