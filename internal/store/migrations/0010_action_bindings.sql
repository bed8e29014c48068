-- An approval binds the whole action it allows (package approvals).
--
-- approval_proposals.action is the proposal's action spec as canonical JSON
-- ('' for a proposal that runs no tool: a hold, a diff): system, target,
-- the target's location, every parameter that will be sent and the
-- domain. Dispatch compares the requested action with it field by field.
ALTER TABLE approval_proposals ADD COLUMN action TEXT NOT NULL DEFAULT '';

-- One row per approval carried out: the claim every dispatching tool takes
-- in the store before acting outside it, so two processes carrying out one
-- approval act once. The primary key is the proposal: an approval executes
-- one action, the one whose hash is action_hash. state is claimed (since
-- claimed_ms, by token; a claim whose holder died lapses after the tool's
-- lease) or done (result is what the tool returns to a retry).
CREATE TABLE approval_executions (
    proposal_id TEXT PRIMARY KEY,
    action_hash TEXT NOT NULL,
    actor TEXT NOT NULL,
    state TEXT NOT NULL,
    token TEXT NOT NULL,
    claimed_ms BIGINT NOT NULL,
    done_ms BIGINT NOT NULL,
    result TEXT NOT NULL
);
