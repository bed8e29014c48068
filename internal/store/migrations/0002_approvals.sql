-- Governance: proposals, the requests sent to named approvers, decisions,
-- and the hash-chained receipts (package approvals).

-- A proposed change. approver is the person whose answer is awaited now;
-- approver_order (JSON array) is the escalation order and round the index
-- into it. targets, scope, copied and details are JSON.
CREATE TABLE approval_proposals (
    id TEXT PRIMARY KEY,
    incident_id TEXT NOT NULL,
    receipt_id TEXT NOT NULL,
    domain TEXT NOT NULL,
    kind TEXT NOT NULL,
    class TEXT NOT NULL,
    what TEXT NOT NULL,
    why TEXT NOT NULL,
    targets TEXT NOT NULL,
    scope TEXT NOT NULL,
    undo TEXT NOT NULL,
    details TEXT NOT NULL,
    proposer TEXT NOT NULL,
    approver TEXT NOT NULL,
    approver_order TEXT NOT NULL,
    round INTEGER NOT NULL,
    copied TEXT NOT NULL,
    state TEXT NOT NULL,
    expiry_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX approval_proposals_open ON approval_proposals (state, expires_ms);
CREATE INDEX approval_proposals_incident ON approval_proposals (incident_id);

-- One row per request put to one approver (a proposal gets a new row each
-- time it escalates). It doubles as the outbox of the Slack listener:
-- posted_ms = 0 means not posted yet; refreshed_ms = 0 on a closed request
-- means its Slack messages still show buttons.
CREATE TABLE approval_requests (
    id AUTO_ID,
    proposal_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    approver TEXT NOT NULL,
    requested_ms BIGINT NOT NULL,
    expires_ms BIGINT NOT NULL,
    outcome TEXT NOT NULL,
    claimed_ms BIGINT NOT NULL,
    posted_ms BIGINT NOT NULL,
    messages TEXT NOT NULL,
    refreshed_ms BIGINT NOT NULL,
    UNIQUE (proposal_id, round)
);
CREATE INDEX approval_requests_outbox ON approval_requests (outcome, posted_ms);

-- At most one decision per proposal: the primary key backs up the
-- conditional state update that lets exactly one of two racing clicks win.
CREATE TABLE approval_decisions (
    proposal_id TEXT PRIMARY KEY,
    verdict TEXT NOT NULL,
    person_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    evidence TEXT NOT NULL,
    reason TEXT NOT NULL,
    round INTEGER NOT NULL,
    decided_ms BIGINT NOT NULL
);

-- Append-only receipt entries, hash-chained per receipt id.
CREATE TABLE receipt_entries (
    receipt_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    payload TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (receipt_id, seq)
);

-- The last seq and hash of each receipt. Appenders serialise on this row,
-- and it lets verify notice entries removed from the end of a chain.
CREATE TABLE receipt_heads (
    receipt_id TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
