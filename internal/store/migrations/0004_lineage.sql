-- The context graph (internal/lineage): assets, the names each is known by,
-- edges with optional column lineage, and a version counter every write
-- bumps so each agent process can cheaply tell its in-memory index is stale.
--
-- Edges reference assets by their integer seq, not their text id: the
-- traversal index loads millions of edges, and an asset's display id may
-- change when two names turn out to be one asset (see lineage_aliases).
CREATE TABLE lineage_assets (
    seq AUTO_ID,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    platform TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    owner_email TEXT NOT NULL DEFAULT '',
    domain TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '[]',
    flags INTEGER NOT NULL DEFAULT 0,
    cron TEXT NOT NULL DEFAULT '',
    timezone TEXT NOT NULL DEFAULT '',
    columns_json TEXT NOT NULL DEFAULT '[]',
    sql_text TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL DEFAULT '',
    sources TEXT NOT NULL DEFAULT '',
    first_seen_ms BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL
);
CREATE INDEX lineage_assets_name_key ON lineage_assets (name_key);

-- Every name an asset is known by: its id, its dbt unique_id, its warehouse
-- relation, OpenLineage's namespace+name. weak = 1 marks a partial name
-- (schema.table without the database) used only when unambiguous;
-- asset_seq = 0 marks a partial name two assets share.
CREATE TABLE lineage_aliases (
    alias TEXT PRIMARY KEY,
    asset_seq BIGINT NOT NULL,
    weak SMALLINT NOT NULL DEFAULT 0
);
CREATE INDEX lineage_aliases_asset ON lineage_aliases (asset_seq);

CREATE TABLE lineage_edges (
    from_seq BIGINT NOT NULL,
    to_seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    sources TEXT NOT NULL,
    first_seen_ms BIGINT NOT NULL,
    last_seen_ms BIGINT NOT NULL,
    PRIMARY KEY (from_seq, to_seq)
);
CREATE INDEX lineage_edges_to ON lineage_edges (to_seq);

-- Column lineage of an edge: from_col -> to_col. to_col '' means the target
-- (a job) reads from_col; to_col '*' means from_col affects every column of
-- the target (a filter or join key).
CREATE TABLE lineage_edge_columns (
    from_seq BIGINT NOT NULL,
    to_seq BIGINT NOT NULL,
    from_col TEXT NOT NULL,
    to_col TEXT NOT NULL,
    source TEXT NOT NULL,
    PRIMARY KEY (from_seq, to_seq, from_col, to_col, source)
);

CREATE TABLE lineage_version (
    id INTEGER PRIMARY KEY,
    version BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
INSERT INTO lineage_version (id, version, updated_ms) VALUES (1, 0, 0);
