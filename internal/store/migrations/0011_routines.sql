-- Routine runs (package routines). A run is one row per (routine, due
-- tick), claimed with INSERT … ON CONFLICT DO NOTHING, so when several
-- watchers share the store each due tick runs once. A running row holds a
-- lease (lease_ms, wall-clock Unix ms) its watcher renews while it works;
-- a row whose lease ran out belongs to a watcher that died, and is marked
-- lost when the routine's next tick is claimed, so a killed watcher never
-- holds a routine forever and its tick is not run twice.
--
-- status: running, ok (nothing found), flagged (incidents opened or
-- joined), failed, canceled (the watcher was stopped mid-run), lost (the
-- lease expired). missed counts the ticks skipped by catching up once
-- after downtime. findings, incidents, notified and proposals (holds a
-- run drafted, or why it drafted none) are JSON arrays.
CREATE TABLE routine_runs (
    id AUTO_ID,
    routine TEXT NOT NULL,
    tick_ms BIGINT NOT NULL,
    watcher TEXT NOT NULL,
    status TEXT NOT NULL,
    lease_ms BIGINT NOT NULL,
    missed INTEGER NOT NULL,
    started_ms BIGINT NOT NULL,
    finished_ms BIGINT NOT NULL,
    summary TEXT NOT NULL,
    error TEXT NOT NULL,
    findings TEXT NOT NULL,
    incidents TEXT NOT NULL,
    notified TEXT NOT NULL,
    proposals TEXT NOT NULL
);
CREATE UNIQUE INDEX routine_runs_tick ON routine_runs (routine, tick_ms);
CREATE INDEX routine_runs_started ON routine_runs (started_ms);
CREATE INDEX routine_runs_status ON routine_runs (routine, status);

-- The first owner message about an incident, so later findings are
-- threaded under it: one row per (incident, person), claimed before the
-- post (ts empty until the post succeeds).
CREATE TABLE routine_notices (
    incident_id TEXT NOT NULL,
    person TEXT NOT NULL,
    via TEXT NOT NULL,
    channel TEXT NOT NULL,
    ts TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (incident_id, person)
);
