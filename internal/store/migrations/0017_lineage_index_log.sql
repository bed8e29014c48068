-- What each lineage write changed in what the traversal index holds, so an
-- agent holding the index applies the change instead of reloading the
-- whole graph (internal/lineage, indexlog.go).
--
-- lineage_version.version still moves on every graph change. topology
-- moves when a write changes what the index holds (assets, edges, column
-- lineage, and the kind, flags, owner and domain walks rank and count by);
-- facts moves when it changes anything else (titles, names, SQL, sources).
-- Each topology version's changes are rows of lineage_index_log with that
-- version. The log holds every change after log_floor: a write too large
-- to log, or one that replaces the graph whole (a staged import), moves
-- the floor to its version and empties the log, and the log is pruned
-- from its oldest end past a few thousand rows; an index older than the
-- floor is loaded again. log_rows counts the rows, so pruning needs no
-- count.
ALTER TABLE lineage_version ADD COLUMN topology BIGINT NOT NULL DEFAULT 0;
ALTER TABLE lineage_version ADD COLUMN facts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE lineage_version ADD COLUMN log_floor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE lineage_version ADD COLUMN log_rows BIGINT NOT NULL DEFAULT 0;
-- Indexes held before this migration know no topology version: starting
-- it at the graph version, with the floor there, makes each load again.
UPDATE lineage_version SET topology = version, facts = version, log_floor = version;

-- One row per asset or edge a write changed, saying what it is now (see
-- graphindex.Change): op 1 asset set (kind, flags, owner, domain), 2 asset
-- removed, 3 edge set (kind), 4 edge removed, 5 an edge's column lineage
-- (cols, a JSON array of [from, to] pairs). n orders a version's rows.
CREATE TABLE lineage_index_log (
    version BIGINT NOT NULL,
    n INTEGER NOT NULL,
    op SMALLINT NOT NULL,
    from_seq BIGINT NOT NULL,
    to_seq BIGINT NOT NULL DEFAULT 0,
    kind TEXT NOT NULL DEFAULT '',
    flags INTEGER NOT NULL DEFAULT 0,
    owner TEXT NOT NULL DEFAULT '',
    domain TEXT NOT NULL DEFAULT '',
    cols TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (version, n)
);
