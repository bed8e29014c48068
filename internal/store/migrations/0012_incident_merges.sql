-- Incidents merged into another (MergeIncidents; close_incident with
-- duplicate_of): the duplicate's symptoms are copied to the incident it
-- duplicates and the duplicate is closed with the close reason "duplicate
-- of <into_id>". Rows are never updated or deleted.
CREATE TABLE incident_merges (
    id AUTO_ID,
    from_id TEXT NOT NULL UNIQUE,
    into_id TEXT NOT NULL,
    actor TEXT NOT NULL,
    note TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX incident_merges_into ON incident_merges (into_id);
