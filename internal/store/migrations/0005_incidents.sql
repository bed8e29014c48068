-- Incidents (internal/incidents): team metric definitions (their points
-- live in metric_points, package baseline), the change log diagnosis ranks
-- causes from, and incidents with their symptoms, assets and status history.

-- A team metric. source is 'pushed' (values arrive through the tool) or
-- 'sql' (computed by running sql_text on the named warehouse). moves_with
-- is a JSON array of metric names that normally move with this one.
CREATE TABLE incident_metrics (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    asset TEXT NOT NULL,
    unit TEXT NOT NULL,
    source TEXT NOT NULL,
    warehouse TEXT NOT NULL,
    sql_text TEXT NOT NULL,
    value_column TEXT NOT NULL,
    time_column TEXT NOT NULL,
    grain TEXT NOT NULL,
    direction TEXT NOT NULL,
    symptom_kind TEXT NOT NULL,
    column_name TEXT NOT NULL,
    moves_with TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

-- The change log. external_key is NULL unless the recorder named the event
-- (a registry version, a Flink restore id): the unique index then makes a
-- repeated recording a no-op, while NULLs never collide. assets, fields and
-- details are JSON. The index on at_ms lets diagnosis read only its
-- lookback window.
CREATE TABLE incident_changes (
    id AUTO_ID,
    external_key TEXT,
    at_ms BIGINT NOT NULL,
    kind TEXT NOT NULL,
    system TEXT NOT NULL,
    assets TEXT NOT NULL,
    fields TEXT NOT NULL,
    state_skipped SMALLINT NOT NULL,
    actor TEXT NOT NULL,
    source TEXT NOT NULL,
    summary TEXT NOT NULL,
    details TEXT NOT NULL,
    recorded_ms BIGINT NOT NULL
);
CREATE UNIQUE INDEX incident_changes_key ON incident_changes (external_key);
CREATE INDEX incident_changes_at ON incident_changes (at_ms);

-- Which assets each change touched, for listing changes by asset.
CREATE TABLE incident_change_assets (
    asset TEXT NOT NULL,
    change_id BIGINT NOT NULL,
    PRIMARY KEY (asset, change_id)
);

-- An incident. version is bumped by every update so a writer that read an
-- older state loses instead of overwriting (conditional UPDATE). causes,
-- proposals and verification are JSON.
CREATE TABLE incidents (
    seq AUTO_ID,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    status TEXT NOT NULL,
    onset_ms BIGINT NOT NULL,
    detected_ms BIGINT NOT NULL,
    diagnosed_ms BIGINT NOT NULL,
    verified_ms BIGINT NOT NULL,
    closed_ms BIGINT NOT NULL,
    causes TEXT NOT NULL,
    top_cause_kind TEXT NOT NULL,
    top_cause_change BIGINT NOT NULL,
    proposals TEXT NOT NULL,
    verification TEXT NOT NULL,
    version BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX incidents_status ON incidents (status, onset_ms);

-- The assets an incident's symptoms are on, for joining and history.
CREATE TABLE incident_assets (
    asset TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    PRIMARY KEY (asset, incident_id)
);
CREATE INDEX incident_assets_incident ON incident_assets (incident_id);

-- Symptoms: failed checks and metric anomalies. The unique key makes a
-- re-reported symptom (the same check on the same bucket) update in place.
CREATE TABLE incident_symptoms (
    id AUTO_ID,
    incident_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    asset TEXT NOT NULL,
    metric TEXT NOT NULL,
    related_metric TEXT NOT NULL,
    column_name TEXT NOT NULL,
    observed DOUBLE NOT NULL,
    expected_low DOUBLE NOT NULL,
    expected_high DOUBLE NOT NULL,
    expected DOUBLE NOT NULL,
    at_ms BIGINT NOT NULL,
    source TEXT NOT NULL,
    detail TEXT NOT NULL,
    recorded_ms BIGINT NOT NULL,
    UNIQUE (incident_id, kind, asset, metric, related_metric, column_name, at_ms)
);

-- Every status change of an incident, in order.
CREATE TABLE incident_events (
    id AUTO_ID,
    incident_id TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    from_status TEXT NOT NULL,
    to_status TEXT NOT NULL,
    actor TEXT NOT NULL,
    note TEXT NOT NULL
);
CREATE INDEX incident_events_incident ON incident_events (incident_id, id);
