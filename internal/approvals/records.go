package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// Proposals and decisions are sealed with an HMAC under the key kept
// outside the store, so dispatch can trust a decision row only when its
// MAC verifies, and a state column set to approved by hand proves nothing.

// ApproverRecord is one person of a proposal's approver chain as the
// config described them when the proposal was made: decisions are checked
// against these identities, not against the decider's config.
type ApproverRecord struct {
	ID      string   `json:"id"`
	OSUsers []string `json:"os_users"`
	SlackID string   `json:"slack_id"`
}

// proposalMutable are the columns that change after a proposal is made
// (escalation, decision, execution) and so stay outside its seal: the
// state is proven by the sealed decision row and receipt entries instead.
var proposalMutable = map[string]bool{
	"approver": true, "round": true, "state": true, "expires_ms": true, "updated_ms": true,
	"mac": true, "mac_columns": true,
}

// RecordStatus says whether a sealed record verifies.
type RecordStatus string

// Record statuses.
const (
	RecordOK RecordStatus = "ok"
	// RecordUnsealed is a record written before keys existed.
	RecordUnsealed RecordStatus = "unauthenticated"
	RecordEdited   RecordStatus = "edited"
)

// snapshotApprovers records the identities of every person in the
// proposal's approver order, from the config in force now.
func snapshotApprovers(cfg *config.Config, order []string) ([]ApproverRecord, error) {
	out := make([]ApproverRecord, 0, len(order))
	for _, id := range order {
		p, ok := cfg.Person(id)
		if !ok {
			return nil, invalid("approver %q is not a person in the config; add them under people: with a slack_id or os_users", id)
		}
		users := append([]string{}, p.OSUsers...)
		sort.Strings(users)
		out = append(out, ApproverRecord{ID: p.ID, OSUsers: users, SlackID: p.SlackID})
	}
	return out, nil
}

// recordApprovers stores the approver snapshot with a just-inserted
// proposal and seals the proposal. The snapshot is the approvers on record
// unless the agent runs as the store admin (routing.go): then a config
// that names others (or a domain with none on record) is recorded in the
// org receipt. A non-admin agent's differing config is only noted there.
// It must be the last write to the proposal's fixed columns.
func (s *Service) recordApprovers(ctx context.Context, tx *store.Tx, p *Proposal, now time.Time) error {
	ks, err := s.keys()
	if err != nil {
		return err
	}
	cfgOrder := p.cfgOrder
	if len(cfgOrder) == 0 {
		cfgOrder = p.ApproverOrder
	}
	r, err := s.routeApprovers(ctx, tx, ks, p.Domain, p.Class, cfgOrder)
	if err != nil {
		return err
	}
	if !slices.Equal(r.order, p.ApproverOrder) {
		// Another process changed the record between prepare and now.
		return invalid("the approvers on record for domain %s changed while the proposal was being made (now %s); propose it again",
			p.Domain, describeSnapshot(r.snap))
	}
	if _, err := tx.ExecContext(ctx, `UPDATE approval_proposals SET approvers = ? WHERE id = ?`, r.body, p.ID); err != nil {
		return fmt.Errorf("record approvers of %s: %w", p.ID, err)
	}
	key := approverKeyPrefix + p.Domain + "." + string(p.Class)
	switch {
	case r.record:
		// Who may approve a domain is itself a governed fact: a change
		// (a new person, a login added to someone) is on the record.
		facts := map[string]any{"domain": p.Domain, "class": p.Class, "approvers": json.RawMessage(r.body),
			"proposal": p.ID, "config": s.cfg.Source, "recorded_as": "store admin " + r.admin.String()}
		if r.previous != "" {
			facts["previous"] = json.RawMessage(r.previous)
		}
		if _, err := appendReceipt(ctx, tx, ks, now, OrgReceiptID, EntryApprovers, p.Proposer, facts); err != nil {
			return err
		}
		if err := store.PutSetting(ctx, tx, key, r.body, now); err != nil {
			return err
		}
	case r.differ != "":
		facts := map[string]any{"domain": p.Domain, "class": p.Class, "config_approvers": json.RawMessage(r.differ),
			"recorded_approvers": json.RawMessage(r.body), "proposal": p.ID, "config": s.cfg.Source,
			"uid": strconv.Itoa(processUID()), "store_admin": r.admin.String(),
			"note": fmt.Sprintf("the agent's config names other approvers for %s than the record; %s went to those on record. "+
				"The store admin, %s, accepts the config's with: dw approvers pin %s --reason …", p.Domain, p.ID, r.admin, p.Domain)}
		if _, err := appendReceipt(ctx, tx, ks, now, OrgReceiptID, EntryApproversDiffer, p.Proposer, facts); err != nil {
			return err
		}
	}
	return sealProposal(ctx, tx, ks, p.ID)
}

// rawRow reads one row's columns by name, as portable scalar values.
func rawRow(ctx context.Context, q store.Querier, query string, args ...any) (map[string]any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, sql.ErrNoRows
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(cols))
	for i, c := range cols {
		out[strings.ToLower(c)] = portable(vals[i])
	}
	return out, rows.Err()
}

// portable maps driver values to one spelling on both engines.
func portable(v any) any {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case time.Time:
		return strconv.FormatInt(x.UnixMilli(), 10)
	case nil:
		return nil
	default:
		return fmt.Sprint(x)
	}
}

// proposalSeal is the MAC over the named columns of a proposal row.
func proposalSeal(ks *keyset, row map[string]any, cols []string) string {
	pairs := make([]any, 0, len(cols))
	for _, c := range cols {
		pairs = append(pairs, []any{c, row[c]})
	}
	b, _ := json.Marshal([]any{"approval-proposal", cols, pairs})
	return mac(ks.record, b)
}

func sealProposal(ctx context.Context, q store.Querier, ks *keyset, id string) error {
	row, err := rawRow(ctx, q, `SELECT * FROM approval_proposals WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("seal proposal %s: %w", id, err)
	}
	var cols []string
	for c := range row {
		if !proposalMutable[c] {
			cols = append(cols, c)
		}
	}
	sort.Strings(cols)
	_, err = q.ExecContext(ctx, `UPDATE approval_proposals SET mac = ?, mac_columns = ? WHERE id = ?`,
		proposalSeal(ks, row, cols), strings.Join(cols, ","), id)
	return err
}

// sealedProposal is what the seal proves about a proposal.
type sealedProposal struct {
	Status    RecordStatus
	MAC       string
	Approvers []ApproverRecord
	CreatedAt time.Time
}

// checkProposal verifies a proposal row's seal and reads its approvers.
func checkProposal(ctx context.Context, q store.Querier, ks *keyset, id string) (sealedProposal, error) {
	row, err := rawRow(ctx, q, `SELECT * FROM approval_proposals WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return sealedProposal{}, notFound(ctx, q, id)
	}
	if err != nil {
		return sealedProposal{}, err
	}
	return checkProposalRow(ks, row), nil
}

func checkProposalRow(ks *keyset, row map[string]any) sealedProposal {
	str := func(c string) string { s, _ := row[c].(string); return s }
	sp := sealedProposal{MAC: str("mac")}
	if ms, err := strconv.ParseInt(str("created_ms"), 10, 64); err == nil {
		sp.CreatedAt = store.FromMillis(ms)
	}
	if sp.MAC == "" {
		sp.Status = RecordUnsealed
		return sp
	}
	cols := strings.Split(str("mac_columns"), ",")
	for _, c := range cols {
		if _, ok := row[c]; !ok || proposalMutable[c] {
			sp.Status = RecordEdited
			return sp
		}
	}
	if !macEqual(proposalSeal(ks, row, cols), sp.MAC) {
		sp.Status = RecordEdited
		return sp
	}
	if err := json.Unmarshal([]byte(str("approvers")), &sp.Approvers); err != nil || len(sp.Approvers) == 0 {
		sp.Status = RecordEdited
		return sp
	}
	sp.Status = RecordOK
	return sp
}

// decisionSeal binds a decision to its proposal's seal: a decision row
// copied to another proposal, or to the same proposal re-made, fails.
func decisionSeal(ks *keyset, proposalMAC string, row map[string]any) string {
	b, _ := json.Marshal([]any{"approval-decision", proposalMAC, row["proposal_id"], row["verdict"], row["person_id"],
		row["channel"], row["evidence"], row["reason"], row["round"], row["decided_ms"]})
	return mac(ks.record, b)
}

const decisionColumns = `proposal_id, verdict, person_id, channel, evidence, reason, round, decided_ms, mac`

// checkedDecision is a decision row and whether its seal verifies.
type checkedDecision struct {
	Status   RecordStatus
	Verdict  Verdict
	PersonID string
	Channel  Channel
	Round    int
	At       time.Time
}

// checkDecision reads a proposal's decision and verifies its seal against
// the proposal's; found is false when there is no decision row.
func checkDecision(ctx context.Context, q store.Querier, ks *keyset, proposalID, proposalMAC string) (checkedDecision, bool, error) {
	row, err := rawRow(ctx, q, `SELECT `+decisionColumns+` FROM approval_decisions WHERE proposal_id = ?`, proposalID)
	if errors.Is(err, sql.ErrNoRows) {
		return checkedDecision{}, false, nil
	}
	if err != nil {
		return checkedDecision{}, false, err
	}
	return checkDecisionRow(ks, proposalMAC, row), true, nil
}

func checkDecisionRow(ks *keyset, proposalMAC string, row map[string]any) checkedDecision {
	str := func(c string) string { s, _ := row[c].(string); return s }
	d := checkedDecision{Verdict: Verdict(str("verdict")), PersonID: str("person_id"), Channel: Channel(str("channel"))}
	d.Round, _ = strconv.Atoi(str("round"))
	if ms, err := strconv.ParseInt(str("decided_ms"), 10, 64); err == nil {
		d.At = store.FromMillis(ms)
	}
	switch m := str("mac"); {
	case m == "":
		d.Status = RecordUnsealed
	case proposalMAC == "" || !macEqual(decisionSeal(ks, proposalMAC, row), m):
		d.Status = RecordEdited
	default:
		d.Status = RecordOK
	}
	return d
}

// insertDecision writes a sealed decision row.
func insertDecision(ctx context.Context, tx *store.Tx, ks *keyset, proposalMAC, proposalID string, verdict Verdict, personID string,
	channel Channel, evidence, reason string, round int, at time.Time) error {
	row := map[string]any{
		"proposal_id": proposalID, "verdict": string(verdict), "person_id": personID, "channel": string(channel),
		"evidence": evidence, "reason": reason, "round": strconv.Itoa(round), "decided_ms": strconv.FormatInt(store.Millis(at), 10),
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO approval_decisions (proposal_id, verdict, person_id, channel, evidence, reason, round, decided_ms, mac)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, proposalID, string(verdict), personID, string(channel), evidence, reason, round,
		store.Millis(at), decisionSeal(ks, proposalMAC, row)); err != nil {
		return fmt.Errorf("record decision on %s: %w", proposalID, err)
	}
	return nil
}

// identityMatches reports whether a channel identity is the recorded one.
func (a ApproverRecord) identityMatches(by Decider) bool {
	switch by.Channel {
	case ChannelSlack:
		return a.SlackID != "" && a.SlackID == by.SlackUserID
	case ChannelTerminal, ChannelElicitation:
		return by.OSUser != "" && slices.Contains(a.OSUsers, by.OSUser)
	}
	return false
}

// resolveDecider finds who is deciding from the channel identity alone,
// among the approvers recorded with the proposal. The person the decider's
// own config names (by.PersonID) only breaks a tie when one login stands
// for several recorded approvers; a config that maps the login to someone
// whose recorded identities do not include it is refused.
func resolveDecider(p Proposal, snap []ApproverRecord, by Decider) (string, error) {
	var matching []string
	for _, a := range snap {
		if a.identityMatches(by) && !slices.Contains(matching, a.ID) {
			matching = append(matching, a.ID)
		}
	}
	allowed := mayDecide(p)
	refusal := func(detail string) error {
		return &NotApproverError{ProposalID: p.ID, PersonID: by.PersonID, Allowed: allowed, Class: p.Class, Detail: detail, Recorded: describeSnapshot(snap)}
	}
	idText := fmt.Sprintf("OS user %q", by.OSUser)
	if by.Channel == ChannelSlack {
		idText = fmt.Sprintf("Slack user %q", by.SlackUserID)
	}
	if by.PersonID != "" && !slices.ContainsFunc(snap, func(a ApproverRecord) bool { return a.ID == by.PersonID }) {
		return "", &NotApproverError{ProposalID: p.ID, PersonID: by.PersonID, Allowed: allowed, Class: p.Class, Recorded: describeSnapshot(snap)}
	}
	if by.PersonID != "" && !slices.Contains(matching, by.PersonID) {
		if by.Channel == ChannelSlack {
			return "", refusal(fmt.Sprintf("%s is not %s's Slack account as recorded with %s", idText, by.PersonID, p.ID))
		}
		return "", refusal(fmt.Sprintf("%s is not mapped to %s in the approvers recorded with %s (the config you loaded does not count)", idText, by.PersonID, p.ID))
	}
	if len(matching) == 0 {
		return "", refusal(fmt.Sprintf("%s is not a recorded identity of any approver of %s", idText, p.ID))
	}
	if by.PersonID != "" && slices.Contains(allowed, by.PersonID) {
		return by.PersonID, nil
	}
	for _, id := range allowed {
		if slices.Contains(matching, id) {
			return id, nil
		}
	}
	return "", &NotApproverError{ProposalID: p.ID, PersonID: strings.Join(matching, " or "), Allowed: allowed, Class: p.Class}
}

func describeSnapshot(snap []ApproverRecord) string {
	var parts []string
	for _, a := range snap {
		var ids []string
		for _, u := range a.OSUsers {
			ids = append(ids, "os:"+u)
		}
		if a.SlackID != "" {
			ids = append(ids, "slack:"+a.SlackID)
		}
		parts = append(parts, fmt.Sprintf("%s [%s]", a.ID, strings.Join(ids, " ")))
	}
	return strings.Join(parts, ", ")
}

// replaySetting marks a store made for replaying a past incident (the
// demo's). Its value is a MAC, so only a holder of the key can set it.
const replaySetting = "store.made_for_replay"

// MarkReplayStore records that a store was made for replay (the demo's):
// on it, and only on it, a replayed clock (DW_CLOCK) also dates decisions.
// home is the data directory whose key the store's agents use. The mark
// is a MAC over the store's own org genesis (its first org entry, which
// carries a random store id), so a mark copied into another store under
// the same key does not verify there.
func MarkReplayStore(ctx context.Context, db *store.DB, home string, at time.Time) error {
	registerHome(db, home)
	ks, err := keysForQuerier(db)
	if err != nil {
		return err
	}
	return db.InTx(ctx, func(tx *store.Tx) error {
		// The genesis is sealed now if the store has none yet.
		if err := recordFoundingAdmin(ctx, tx, ks, at); err != nil {
			return err
		}
		genesis, err := orgGenesis(ctx, tx)
		if err != nil {
			return err
		}
		if genesis == "" {
			return errors.New("mark replay store: the org receipt has no first entry")
		}
		return store.PutSetting(ctx, tx, replaySetting, replayMark(ks, genesis), at)
	})
}

// replayMark binds the replay mark to one store's org genesis.
func replayMark(ks *keyset, genesis string) string {
	b, _ := json.Marshal([]any{replaySetting, genesis})
	return mac(ks.record, b)
}

// IsReplayStore reports whether db carries a replay mark that verifies
// under the key of home's agents for this very store: a mark copied from
// another store, or written without the key, does not count.
func IsReplayStore(ctx context.Context, db *store.DB, home string) (bool, error) {
	registerHome(db, home)
	ks, err := keysForQuerier(db)
	if err != nil {
		return false, err
	}
	return isReplayStore(ctx, db, ks)
}

func isReplayStore(ctx context.Context, q store.Querier, ks *keyset) (bool, error) {
	v, _, ok, err := store.GetSetting(ctx, q, replaySetting)
	if err != nil || !ok {
		return false, err
	}
	// The genesis must be genuine: its MAC copied from the demo store's
	// over this store's first entry would otherwise carry the mark over.
	r, err := scanRawGovEntry(q.QueryRowContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
		WHERE receipt_id = ? AND seq = 1`, OrgReceiptID))
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if r.gseq <= 0 || !macEqual(entryMAC(ks, OrgReceiptID, r.seq, r.kind, r.actor, r.atMs, r.prev, r.payload, r.gseq, r.gprev), r.hash) {
		return false, nil
	}
	return macEqual(v, replayMark(ks, r.hash)), nil
}

// verifyApproval checks, for a proposal whose state says approved, that
// the proposal's seal holds and that a sealed decision to approve exists,
// made by an approver recorded with the proposal, allowed in the round it
// answered, and dated no earlier than the proposal. Any other state is
// left to the dispatch rules, which refuse it anyway.
func (s *Service) verifyApproval(ctx context.Context, p *Proposal) error {
	if p.State != StateApproved {
		return nil
	}
	ks, err := s.keys()
	if err != nil {
		return err
	}
	sp, err := checkProposal(ctx, s.db, ks, p.ID)
	if err != nil {
		return err
	}
	switch sp.Status {
	case RecordUnsealed:
		return refuse("proposal %s was made before proposals were sealed with a key, so its approval cannot be proven; propose it again", p.ID)
	case RecordEdited:
		return refuse("proposal %s fails its seal: the stored proposal was changed after it was made (dw receipt verify shows it)", p.ID)
	}
	d, found, err := checkDecision(ctx, s.db, ks, p.ID, sp.MAC)
	if err != nil {
		return err
	}
	switch {
	case !found:
		return refuse("proposal %s is marked approved but no decision is recorded for it: the state was set outside Decide; nothing runs", p.ID)
	case d.Status == RecordUnsealed:
		return refuse("proposal %s's decision was recorded before decisions were sealed, so it cannot be proven; propose it again", p.ID)
	case d.Status == RecordEdited:
		return refuse("proposal %s's decision record fails its seal: it was edited or belongs to another proposal (dw receipt verify shows it)", p.ID)
	case d.Verdict != VerdictApprove:
		return refuse("proposal %s is marked approved but its sealed decision is %q by %s", p.ID, d.Verdict, d.PersonID)
	case d.At.Before(sp.CreatedAt):
		return refuse("proposal %s's decision is dated %s, before the proposal was made at %s", p.ID, stamp(d.At), stamp(sp.CreatedAt))
	}
	// The decider must be one of the recorded approvers asked by the
	// round they answered (the owner alone for a live change).
	end := d.Round + 1
	if p.Class == ClassLive {
		end = 1
	}
	ok := false
	for i, a := range sp.Approvers {
		if i < end && a.ID == d.PersonID {
			ok = true
		}
	}
	if !ok {
		return refuse("proposal %s's decision is by %s, who is not among the approvers recorded for round %d", p.ID, d.PersonID, d.Round)
	}
	// A state set back from executed would let one approval run twice.
	rows, err := s.db.QueryContext(ctx, `SELECT payload FROM receipt_entries WHERE receipt_id = ? AND kind = ? AND gseq > 0`, p.ReceiptID, EntryExecuted)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return err
		}
		var pl struct {
			Proposal string `json:"proposal"`
		}
		if json.Unmarshal([]byte(body), &pl) == nil && pl.Proposal == p.ID {
			return refuse("proposal %s is marked approved, but its receipt records it executed: an approval runs once (the state was reset outside Data Workers)", p.ID)
		}
	}
	return rows.Err()
}

// approversSummary is the receipt line for an approvers entry.
func approversSummary(f map[string]any) string {
	read := func(v any) []ApproverRecord {
		raw, _ := json.Marshal(v)
		var out []ApproverRecord
		_ = json.Unmarshal(raw, &out)
		return out
	}
	now := describeSnapshot(read(f["approvers"]))
	if _, had := f["previous"]; !had {
		return fmt.Sprintf("domain %v (%v) approvers recorded: %s (with %v)", f["domain"], f["class"], now, f["proposal"])
	}
	return fmt.Sprintf("domain %v (%v) approvers changed to %s, were %s (with %v)", f["domain"], f["class"], now, describeSnapshot(read(f["previous"])), f["proposal"])
}
