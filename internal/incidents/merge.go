package incidents

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/store"
)

// Close reasons, derived from how an incident was closed.
const (
	CloseFixed     = "fixed"     // closed after its verified fix
	CloseDismissed = "dismissed" // closed without a fix: a false alarm
	CloseDuplicate = "duplicate" // merged into the incident it duplicates
)

// MergeParams merges a duplicate incident into the one it duplicates.
type MergeParams struct {
	Into  string `json:"into" jsonschema:"the incident that stays, e.g. INC-3"`
	From  string `json:"from" jsonschema:"the duplicate, closed as duplicate of into, e.g. INC-4"`
	Actor string `json:"actor,omitempty" jsonschema:"who merges them"`
	Note  string `json:"note,omitempty" jsonschema:"why they are one incident"`
}

// MergeIncidents records that one incident duplicates another: the
// duplicate's symptoms join the incident that stays (its onset moves
// earlier if theirs began first), the duplicate is closed with the close
// reason "duplicate of <into>", and both timelines say so. Only an open or
// diagnosed duplicate can be merged: one with a fix in progress has its
// own approvals and verification.
func (s *Service) MergeIncidents(ctx context.Context, p MergeParams) (*Incident, error) {
	into, from := normalizeID(p.Into), normalizeID(p.From)
	if into == "" || from == "" {
		return nil, invalid("name both incidents: into (the one that stays) and from (the duplicate)")
	}
	if into == from {
		return nil, invalid("%s cannot duplicate itself: name two different incidents", into)
	}
	note := strings.TrimSpace(p.Note)
	if !utf8.ValidString(note) || strings.ContainsRune(note, 0) || len(note) > maxReason {
		return nil, invalid("note must be UTF-8 text without NUL bytes, at most %d bytes", maxReason)
	}
	actor := orText(strings.TrimSpace(p.Actor), "dw-incidents")
	now := s.now()
	var out *Incident
	err := s.DB.InTx(ctx, func(tx *store.Tx) error {
		dst, err := loadIncident(ctx, tx, into)
		if err != nil {
			return err
		}
		dup, err := loadIncident(ctx, tx, from)
		if err != nil {
			return err
		}
		if !dst.Status.active() {
			return invalid("%s is %s: merge into an incident still being handled", dst.ID, dst.Status)
		}
		if dup.Status != StatusOpen && dup.Status != StatusDiagnosed {
			return invalid("%s is %s: only an open or diagnosed incident can be merged as a duplicate (one with proposals or a fix has its own record)", dup.ID, dup.Status)
		}
		for _, sym := range dup.Symptoms {
			if err := addSymptom(ctx, tx, dst.ID, sym, now); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO incident_merges (from_id, into_id, actor, note, at_ms) VALUES (?, ?, ?, ?, ?)`,
			dup.ID, dst.ID, actor, note, store.Millis(now)); err != nil {
			return fmt.Errorf("record the merge of %s into %s: %w", dup.ID, dst.ID, err)
		}
		why := "duplicate of " + dst.ID
		if note != "" {
			why += ": " + note
		}
		from := dup.Status
		dup.Status, dup.ClosedAt = StatusClosed, now
		if err := save(ctx, tx, dup, from, actor, why, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE incidents SET onset_ms = (SELECT MIN(at_ms) FROM incident_symptoms WHERE incident_id = ?)
			WHERE id = ?`, dst.ID, dst.ID); err != nil {
			return fmt.Errorf("update incident %s onset: %w", dst.ID, err)
		}
		// Reload for the version the onset update left.
		if dst, err = loadIncident(ctx, tx, dst.ID); err != nil {
			return err
		}
		msg := fmt.Sprintf("merged %s (%d symptom(s) on %s)", dup.ID, len(dup.Symptoms), strings.Join(dup.Assets, ", "))
		if note != "" {
			msg += ": " + note
		}
		if err := save(ctx, tx, dst, dst.Status, actor, msg, now); err != nil {
			return err
		}
		out, err = loadIncident(ctx, tx, dst.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// loadMerges fills an incident's close reason and merge links.
func loadMerges(ctx context.Context, q store.Querier, inc *Incident) error {
	rows, err := q.QueryContext(ctx, `SELECT from_id, into_id FROM incident_merges WHERE from_id = ? OR into_id = ? ORDER BY id`, inc.ID, inc.ID)
	if err != nil {
		return fmt.Errorf("read merges of %s: %w", inc.ID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var from, into string
		if err := rows.Scan(&from, &into); err != nil {
			return err
		}
		if from == inc.ID {
			inc.DuplicateOf = into
		} else {
			inc.MergedFrom = append(inc.MergedFrom, from)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	switch {
	case inc.Status != StatusClosed:
	case inc.DuplicateOf != "":
		inc.CloseReason = CloseDuplicate
	case !inc.VerifiedAt.IsZero():
		inc.CloseReason = CloseFixed
	default:
		inc.CloseReason = CloseDismissed
	}
	return nil
}
