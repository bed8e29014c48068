-- Schema Registry versions Data Workers has seen, so a compatibility check
-- works offline and a version's first sighting can be dated.
CREATE TABLE registry_versions (
    subject TEXT NOT NULL,
    version BIGINT NOT NULL,
    schema_id BIGINT NOT NULL,
    schema_type TEXT NOT NULL,
    schema_text TEXT NOT NULL,
    references_json TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    first_seen_ms BIGINT NOT NULL,
    PRIMARY KEY (subject, version)
);

-- Column snapshots of warehouse tables, one row per observed change (the
-- first snapshot and every one that differs from the one before).
CREATE TABLE table_snapshots (
    id AUTO_ID,
    warehouse TEXT NOT NULL,
    table_name TEXT NOT NULL,
    taken_ms BIGINT NOT NULL,
    columns_json TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    diff_json TEXT NOT NULL
);
CREATE INDEX table_snapshots_by_table ON table_snapshots (warehouse, table_name, taken_ms);
