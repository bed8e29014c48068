-- Downstream runs dispatched to orchestrators (package orchestrate): one row
-- per idempotency key, the approval (proposal, or open-class request) plus
-- system and target. The row is claimed with INSERT … ON CONFLICT DO NOTHING
-- before the trigger, so a retry or a second process never starts a second
-- run.
--
-- state: claimed (a trigger is under way since claimed_ms, by claim_token),
-- trigger_failed (the last trigger got an error; a retry may try again, and
-- the system's own idempotency finds a run that did start; trigger_unknown = 1
-- when that attempt got no answer, so it may have started), triggered (run_id
-- is known). status is the run's normalised state once triggered (queued,
-- running, succeeded, failed, canceled, unknown); upstream_status the
-- system's own word. receipt_state says which receipt steps are written
-- ('', triggered, finished); receipt_claim_ms guards writing them once.
CREATE TABLE orchestrate_runs (
    run_key TEXT PRIMARY KEY,
    upstream_key TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    incident_id TEXT NOT NULL,
    receipt_id TEXT NOT NULL,
    domain TEXT NOT NULL,
    kind TEXT NOT NULL,
    basis TEXT NOT NULL,
    actor TEXT NOT NULL,
    system TEXT NOT NULL,
    target TEXT NOT NULL,
    params TEXT NOT NULL,
    state TEXT NOT NULL,
    claim_token TEXT NOT NULL,
    claimed_ms BIGINT NOT NULL,
    attempts INTEGER NOT NULL,
    last_error TEXT NOT NULL,
    trigger_unknown INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    url TEXT NOT NULL,
    existing INTEGER NOT NULL,
    status TEXT NOT NULL,
    upstream_status TEXT NOT NULL,
    status_message TEXT NOT NULL,
    receipt_state TEXT NOT NULL,
    receipt_claim_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    triggered_ms BIGINT NOT NULL,
    started_ms BIGINT NOT NULL,
    finished_ms BIGINT NOT NULL,
    polled_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX orchestrate_runs_proposal ON orchestrate_runs (proposal_id);
CREATE INDEX orchestrate_runs_run ON orchestrate_runs (system, run_id);
