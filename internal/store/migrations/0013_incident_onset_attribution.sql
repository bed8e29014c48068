-- The end of the bucket a symptom was checked over (excluded), so an
-- incident's onset is an interval: the problem began between the start
-- and the end of the first anomalous bucket, and a change inside that
-- bucket is a candidate cause. 0 for symptoms recorded before this
-- column: an hour-aligned symptom is then read as an hourly bucket.
ALTER TABLE incident_symptoms ADD COLUMN until_ms BIGINT NOT NULL DEFAULT 0;

-- Causes people attribute to an incident (dw cause set): a person names
-- the recorded change behind it, overriding or confirming the ranking.
-- Rows are never updated: the latest row is the incident's attributed
-- cause, and the earlier ones are the corrections' history.
CREATE TABLE incident_cause_attributions (
    id AUTO_ID,
    incident_id TEXT NOT NULL,
    change_id BIGINT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX incident_cause_attributions_incident ON incident_cause_attributions (incident_id, id);
