-- Records that verify on their own (package approvals). Every MAC is
-- HMAC-SHA256 under a key kept outside the store (a 0600 file in DW_HOME,
-- or DW_RECEIPT_KEY / DW_RECEIPT_KEY_FILE): someone who can write the store
-- but not read the key cannot forge or re-seal a record. '' marks a record
-- written before keys existed; verify reports it as unauthenticated.

-- approvers is the approver chain fixed when the proposal was made: each
-- person id in escalation order with the channel identities (OS logins,
-- Slack user id) the config gave them then (JSON). Decisions are checked
-- against it, never against the config of whoever decides. mac covers
-- every column that never changes after the proposal is made, approvers
-- included; mac_columns lists them, so a column added by a later
-- migration does not break the seal of older rows.
ALTER TABLE approval_proposals ADD COLUMN approvers TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_proposals ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_proposals ADD COLUMN mac_columns TEXT NOT NULL DEFAULT '';

-- mac covers the whole decision row and the proposal's mac, so a decision
-- cannot be moved to another proposal or edited.
ALTER TABLE approval_decisions ADD COLUMN mac TEXT NOT NULL DEFAULT '';

-- gseq numbers every keyed receipt entry across all receipts and gprev is
-- the hash of the entry numbered gseq-1: one global chain beside each
-- receipt's own, so a receipt deleted whole leaves a gap. 0 and '' mark an
-- entry written before keys.
ALTER TABLE receipt_entries ADD COLUMN gseq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE receipt_entries ADD COLUMN gprev TEXT NOT NULL DEFAULT '';
CREATE INDEX receipt_entries_gseq ON receipt_entries (gseq);

-- The global chain's head: one row (id 1), advanced by every append, so a
-- removed tail shows unless the head is rolled back too (a published
-- anchor, dw receipt anchor, catches that).
CREATE TABLE receipt_global_head (
    id INTEGER PRIMARY KEY,
    seq BIGINT NOT NULL,
    hash TEXT NOT NULL
);
