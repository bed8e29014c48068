package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// Decide records a person's decision on a proposal. It is the only way a
// proposal becomes approved or rejected.
//
// Who decides comes from the channel's own identity (the OS account by
// uid, the clicking Slack user) matched against the approvers recorded
// with the proposal when it was made, never against the config of whoever
// calls: a config mapping one's login to the approver changes nothing.
// The decider must be the named approver: the current one in the
// escalation order or, for the standard class, one asked in an earlier
// round; a live-class proposal accepts its asset owner only. The decision
// is dated by the approvals clock (see now: the real time, a replayed
// clock only on a store made for replay), so an expired request is never decidable and no decision
// predates its proposal. When two people decide at once exactly one wins;
// the other gets a *DecidedError naming the winner.
func (s *Service) Decide(ctx context.Context, proposalID string, by Decider, verdict Verdict, reason string) (*Proposal, error) {
	id := normID(proposalID)
	if verdict != VerdictApprove && verdict != VerdictReject {
		return nil, invalid("unknown verdict %q; valid: approve, reject", verdict)
	}
	switch by.Channel {
	case ChannelSlack, ChannelTerminal, ChannelElicitation:
	default:
		return nil, invalid("channel %q is not a person channel; valid: slack, elicitation, terminal (agents cannot approve or reject)", by.Channel)
	}
	ks, err := s.keys()
	if err != nil {
		return nil, err
	}
	now, replayed, err := s.clockNow(ctx)
	if err != nil {
		return nil, err
	}
	if replayed {
		// On a replay store each process starts its replayed clock afresh
		// at the replayed instant, so a decision may read a little earlier
		// than the proposal an agent made seconds into its run: it is
		// dated at the proposal then, never before it.
		if cur, err := loadProposal(ctx, s.db, id); err == nil && now.Before(cur.CreatedAt) {
			now = cur.CreatedAt
		}
	}
	if _, err := s.sweepAt(ctx, id, now); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		p, err := loadProposal(ctx, tx, id)
		if err != nil {
			return err
		}
		if !p.State.Open() {
			return &DecidedError{Proposal: p}
		}
		if now.Before(p.CreatedAt) {
			return invalid("%s was proposed at %s, after this decision's time %s: a decision is never dated before its proposal (DW_CLOCK dates decisions only on a store made for replay)",
				p.ID, stamp(p.CreatedAt), stamp(now))
		}
		if !now.Before(p.ExpiresAt) {
			return invalid("%s's request to %s expired at %s; it is no longer decidable (nothing was granted)", p.ID, p.Approver, stamp(p.ExpiresAt))
		}
		sp, err := checkProposal(ctx, tx, ks, p.ID)
		if err != nil {
			return err
		}
		switch sp.Status {
		case RecordUnsealed:
			return invalid("%s was proposed before proposals were sealed, so who may decide it was never recorded; nothing was decided: have the agent propose it again", p.ID)
		case RecordEdited:
			return invalid("%s fails its seal: the stored proposal was changed after it was made; nothing was decided (dw receipt verify shows what)", p.ID)
		}
		if by.PersonID != "" && !slices.ContainsFunc(sp.Approvers, func(a ApproverRecord) bool { return a.ID == by.PersonID }) {
			if _, ok := s.cfg.Person(by.PersonID); !ok {
				return invalid("%q is not a person in the config; decisions come only from people (agents cannot approve or reject)", by.PersonID)
			}
		}
		person, err := resolveDecider(p, sp.Approvers, by)
		if err != nil {
			return err
		}
		if verdict == VerdictApprove {
			// An approval covers every dataset its event names; one whose
			// full list cannot be shown is not approvable (datasets.go).
			if err := checkLineageDatasets(&p); err != nil {
				return invalid("%s cannot be approved: %v; nothing was decided", p.ID, err)
			}
			// Whatever the channel, approving an event whose request
			// lists only some of its datasets needs the decider to have
			// been shown every one: the channel vouches for it with the
			// full list's digest (dw approve does; a Slack button or the
			// client form cannot show the list, so they cannot approve).
			if err := confirmedAllDatasets(&p, by); err != nil {
				return err
			}
		}
		if person == p.Proposer {
			return invalid("%s proposed %s and cannot decide it", person, p.ID)
		}
		state := StateApproved
		if verdict == VerdictReject {
			state = StateRejected
		}
		res, err := tx.ExecContext(ctx, `UPDATE approval_proposals SET state = ?, updated_ms = ?
			WHERE id = ? AND round = ? AND state IN ('pending', 'escalated')`, string(state), store.Millis(now), p.ID, p.Round)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			// Lost a race: another decision or an escalation got here first.
			cur, err := loadProposal(ctx, tx, id)
			if err != nil {
				return err
			}
			if !cur.State.Open() {
				return &DecidedError{Proposal: cur}
			}
			return fmt.Errorf("%s escalated to %s while you decided; decide again", id, cur.Approver)
		}
		ev := evidenceOf(by)
		evJSON, err := canonicalJSON(ev)
		if err != nil {
			return err
		}
		if err := insertDecision(ctx, tx, ks, sp.MAC, p.ID, verdict, person, by.Channel, evJSON, reason, p.Round, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approval_requests SET outcome = 'decided' WHERE proposal_id = ? AND outcome = 'open'`, p.ID); err != nil {
			return err
		}
		_, err = appendReceipt(ctx, tx, ks, now, p.ReceiptID, EntryDecision, person, map[string]any{
			"proposal": p.ID, "verdict": verdict, "person": person, "channel": by.Channel,
			"evidence": json.RawMessage(evJSON), "reason": reason, "round": p.Round, "approver": p.Approver,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	p, err := loadProposal(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// now is the one approvals clock: every time this package writes (a
// proposal's creation and deadline, a decision, an escalation or expiry, a
// step, an execution claim, a notice, a receipt entry) is read from it, so
// the records of one store never disagree about when things happened. It
// is the service clock unless that clock stands in for another time
// (DW_CLOCK, the demo's slowed clock) on a store not made for replay: then
// it is the real wall clock, so a clock set ahead can neither expire a
// live request nor date a record in the future, and one set behind cannot
// make an expired request decidable. A clock that is not a replay (the
// system clock; a test's fake) is the real time by definition.
func (s *Service) now(ctx context.Context) (time.Time, error) {
	t, _, err := s.clockNow(ctx)
	return t, err
}

// Now is the approvals clock's time (see now): what an agent dates a
// receipt entry with, so it agrees with the proposals and decisions.
func (s *Service) Now(ctx context.Context) (time.Time, error) { return s.now(ctx) }

// clockNow is now, and whether the time is a replayed one.
func (s *Service) clockNow(ctx context.Context) (time.Time, bool, error) {
	r, ok := s.clk.(clock.Replayed)
	if !ok || !r.Replayed() {
		return s.clk.Now(), false, nil
	}
	if !s.replay.Load() {
		ks, err := s.keys()
		if err != nil {
			return time.Time{}, false, err
		}
		replay, err := isReplayStore(ctx, s.db, ks)
		if err != nil {
			return time.Time{}, false, err
		}
		if !replay {
			return time.Now().UTC(), false, nil
		}
		// A store stays made for replay, so the answer is kept; a "no"
		// is asked again, since the demo marks its store after opening.
		s.replay.Store(true)
	}
	return s.clk.Now(), true, nil
}

// mayDecide lists who may decide an open proposal now.
func mayDecide(p Proposal) []string {
	if p.Class == ClassLive {
		return p.ApproverOrder[:1]
	}
	end := p.Round + 1
	if end > len(p.ApproverOrder) {
		end = len(p.ApproverOrder)
	}
	// The current approver first, so messages name them first.
	out := []string{p.Approver}
	for i := end - 1; i >= 0; i-- {
		if !slices.Contains(out, p.ApproverOrder[i]) {
			out = append(out, p.ApproverOrder[i])
		}
	}
	return out
}

// MayDecide lists the person ids who may decide the proposal now (empty
// once it is decided or expired).
func MayDecide(p Proposal) []string {
	if !p.State.Open() {
		return nil
	}
	return mayDecide(p)
}

// MaxReason bounds a decision's reason, in characters: the free-text
// bound every tool argument has (mcpserver.MaxText). A reason reaches
// Decide from channels no argument checker guards (the client's form
// answer, a terminal argument, a Slack modal), and it is kept in the
// receipt and shown whole in every view of it: a 3 MiB reason sent back
// in the form made get_receipt and get_incident answer 3 MB each.
const MaxReason = 4096

// checkReason refuses a reason over MaxReason characters or holding what
// checkText refuses in multi-line text (a NUL, which PostgreSQL cannot
// store, other control characters, invisible formatting); nothing is
// decided, so the person can say it again within the rule.
func checkReason(reason string) error {
	if n := utf8.RuneCountInString(reason); n > MaxReason {
		return invalid("the reason is %d characters; at most %d: say why in a few sentences; nothing was decided", n, MaxReason)
	}
	if err := checkText("the reason", reason, true); err != nil {
		return invalid("%v; nothing was decided", err)
	}
	return nil
}
