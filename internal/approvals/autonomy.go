package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// LevelNames says what each autonomy level lets agents do.
var LevelNames = map[string]string{
	"L0": "manual",
	"L1": "observe",
	"L2": "propose",
	"L3": "act reversibly",
	"L4": "autonomous",
}

// LevelInfo is a domain's effective autonomy level and where it came from.
type LevelInfo struct {
	Domain string `json:"domain"`
	Level  string `json:"level" jsonschema:"L0 manual, L1 observe, L2 propose, L3 act reversibly, L4 autonomous"`
	Name   string `json:"name"`
	// Source is "config", or "set" when a person set it with dw autonomy.
	Source      string    `json:"source"`
	ConfigLevel string    `json:"config_level"`
	SetBy       string    `json:"set_by,omitempty"`
	SetAt       time.Time `json:"set_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	OpenClasses []string  `json:"open_classes,omitempty" jsonschema:"action kinds an L3 domain runs without a per-action approval"`
	// Tampered says how the store's setting disagrees with the org
	// receipt; the domain then runs at L0 (Source "tampered").
	Tampered string `json:"tampered,omitempty" jsonschema:"set when the stored level disagrees with the sealed org receipt; the domain then runs at L0"`
}

type levelOverride struct {
	Level  string    `json:"level"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func autonomyKey(domain string) string { return "autonomy." + domain }

// Level is a domain's effective autonomy: the level a person set with
// `dw autonomy set`, else the config's.
func (s *Service) Level(ctx context.Context, domain string) (LevelInfo, error) {
	d, err := Domain(s.cfg, domain)
	if err != nil {
		return LevelInfo{}, err
	}
	return s.levelOf(ctx, s.db, d)
}

// levelOf is the level the org receipt proves (govstate.go); a stored
// setting that disagrees with it is not honoured: the domain drops to L0,
// the lowest, until its owner sets a level again.
func (s *Service) levelOf(ctx context.Context, q store.Querier, d *config.Domain) (LevelInfo, error) {
	li := LevelInfo{Domain: d.Name, Level: d.Autonomy, Source: "config", ConfigLevel: d.Autonomy, OpenClasses: d.OpenClasses}
	ks, err := s.keys()
	if err != nil {
		return li, err
	}
	o, set, problem, err := readLevel(ctx, q, ks, s.db, d.Name)
	if err != nil {
		return li, err
	}
	switch {
	case chainBroken(problem):
		li.Level, li.Source, li.OpenClasses = "L0", "tampered", nil
		li.Tampered = fmt.Sprintf("%s; %s runs at L0: %s", problem, d.Name, chainAdvice)
	case problem != "":
		li.Level, li.Source, li.OpenClasses = "L0", "tampered", nil
		li.Tampered = fmt.Sprintf("%s: the store was changed outside Data Workers, so %s runs at L0 until an owner sets its level again (dw autonomy set); %s", problem, d.Name, tamperedAdvice)
	case set:
		li.Level, li.Source, li.SetBy, li.SetAt, li.Reason = o.Level, "set", o.By, o.At, o.Reason
	}
	li.Name = LevelNames[li.Level]
	return li, nil
}

// Levels lists every domain's effective level.
func (s *Service) Levels(ctx context.Context) ([]LevelInfo, error) {
	out := make([]LevelInfo, 0, len(s.cfg.Domains))
	for i := range s.cfg.Domains {
		li, err := s.levelOf(ctx, s.db, &s.cfg.Domains[i])
		if err != nil {
			return nil, err
		}
		out = append(out, li)
	}
	return out, nil
}

// SetAutonomy changes a domain's level. Only a person at the terminal who
// owns the domain may, and the change is recorded in the org receipt: no
// agent can raise its own level.
func (s *Service) SetAutonomy(ctx context.Context, domain, level string, by Decider, reason string) (LevelInfo, error) {
	d, err := Domain(s.cfg, domain)
	if err != nil {
		return LevelInfo{}, err
	}
	level = strings.ToUpper(strings.TrimSpace(level))
	if _, ok := LevelNames[level]; !ok {
		return LevelInfo{}, invalid("unknown level %q; valid: L0 (manual), L1 (observe), L2 (propose), L3 (act reversibly), L4 (autonomous)", level)
	}
	now, err := s.now(ctx)
	if err != nil {
		return LevelInfo{}, err
	}
	person, err := s.ownerAtTerminal(ctx, d, by, reason, now)
	if err != nil {
		return LevelInfo{}, err
	}
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		before, err := s.levelOf(ctx, tx, d)
		if err != nil {
			return err
		}
		val, _ := json.Marshal(levelOverride{Level: level, By: person, Reason: reason, At: now})
		if err := store.PutSetting(ctx, tx, autonomyKey(d.Name), string(val), now); err != nil {
			return err
		}
		_, err = s.appendEntry(ctx, tx, now, OrgReceiptID, EntryAutonomy, person, withRepair(map[string]any{
			"domain": d.Name, "from": before.Level, "to": level, "reason": reason, "channel": by.Channel, "evidence": evidenceOf(by),
		}, before.Tampered))
		return err
	})
	if err != nil {
		return LevelInfo{}, err
	}
	return s.Level(ctx, d.Name)
}

// ResetAutonomy returns a domain to the level its config names, recorded
// like SetAutonomy.
//
// A domain the config does not name can still carry a level in the store
// (forged, or left by a domain since removed): it is cleared here too, by
// one of the domain's recorded approvers or the store admin (clear.go).
func (s *Service) ResetAutonomy(ctx context.Context, domain string, by Decider, reason string) (LevelInfo, error) {
	d, err := Domain(s.cfg, domain)
	if err != nil {
		if li, ok, cerr := s.clearUnconfigured(ctx, domain, by, reason); ok || cerr != nil {
			return li, cerr
		}
		return LevelInfo{}, err
	}
	now, err := s.now(ctx)
	if err != nil {
		return LevelInfo{}, err
	}
	person, err := s.ownerAtTerminal(ctx, d, by, reason, now)
	if err != nil {
		return LevelInfo{}, err
	}
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		before, err := s.levelOf(ctx, tx, d)
		if err != nil {
			return err
		}
		// A tampered level is reset too: the owner's reset is recorded
		// with what was found, and the store agrees with the receipt again.
		if before.Source == "config" {
			return invalid("domain %s already runs at its configured level %s", d.Name, d.Autonomy)
		}
		if err := store.DeleteSetting(ctx, tx, autonomyKey(d.Name)); err != nil {
			return err
		}
		_, err = s.appendEntry(ctx, tx, now, OrgReceiptID, EntryAutonomy, person, withRepair(map[string]any{
			"domain": d.Name, "from": before.Level, "to": d.Autonomy, "reason": reason, "reset": true,
			"channel": by.Channel, "evidence": evidenceOf(by),
		}, before.Tampered))
		return err
	})
	if err != nil {
		return LevelInfo{}, err
	}
	return s.Level(ctx, d.Name)
}

// ownerAtTerminal is the owner of d acting at the terminal: a person
// recorded as an approver of d whose recorded OS account is the caller's
// (governors.go), and an owner of d.
func (s *Service) ownerAtTerminal(ctx context.Context, d *config.Domain, by Decider, reason string, now time.Time) (string, error) {
	if by.Channel != ChannelTerminal {
		return "", invalid("autonomy levels change only in the config or by a person at the terminal (dw autonomy set), not via %s", by.Channel)
	}
	if strings.TrimSpace(reason) == "" {
		return "", invalid("a reason is required: the change is recorded for auditors")
	}
	person, err := s.governor(ctx, d, by, "changing a domain's autonomy", func(id string) bool { return slices.Contains(d.Owners, id) }, now)
	if err != nil {
		return "", err
	}
	if person == "" {
		who := by.PersonID
		if who == "" {
			who = "OS user " + by.OSUser
		}
		return "", invalid("%s does not own domain %s; its owners are %s", who, d.Name, orNone(d.Owners))
	}
	return person, nil
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "(none configured)"
	}
	return strings.Join(ids, ", ")
}

// StopState is the org-wide stop.
type StopState struct {
	Active bool      `json:"active"`
	By     string    `json:"by,omitempty" jsonschema:"person id, or os:<login> for an unmapped login"`
	OSUser string    `json:"os_user,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Tampered says how the store's stop disagrees with the org receipt;
	// dispatch is then refused as if stopped (Active is true).
	Tampered string `json:"tampered,omitempty" jsonschema:"set when the stored stop disagrees with the sealed org receipt; all dispatch is refused"`
}

// Refusal is why dispatch may not run under this stop.
func (st StopState) Refusal() error {
	if chainBroken(st.Tampered) {
		return refuse("%s; all dispatch is refused as if stopped: %s", st.Tampered, chainAdvice)
	}
	if st.Tampered != "" {
		return refuse("org-wide governance state was tampered with: %s; all dispatch is refused as if stopped: %s, then a person lifts it with dw resume", st.Tampered, tamperedAdvice)
	}
	return refuse("org-wide stop in force since %s by %s: %q (a person lifts it with dw resume)",
		st.Since.UTC().Format("15:04 UTC on 2006-01-02"), st.By, st.Reason)
}

// withRepair notes, in an org receipt entry, the tampering the change
// replaces, so fixing the state never erases the finding.
func withRepair(payload map[string]any, tampered string) map[string]any {
	if tampered != "" {
		payload["replaces_tampered"] = tampered
	}
	return payload
}

const stopKey = "org.stop"

// StopStatus reads the org-wide stop.
func (s *Service) StopStatus(ctx context.Context) (StopState, error) {
	return s.stopStatus(ctx, s.db)
}

// stopStatus is the stop the org receipt proves (govstate.go); a stored
// stop that disagrees with it reads as a stop that is Tampered.
func (s *Service) stopStatus(ctx context.Context, q store.Querier) (StopState, error) {
	ks, err := s.keys()
	if err != nil {
		return StopState{}, err
	}
	return readStop(ctx, q, ks, s.db)
}

// Stop halts all dispatch org-wide until Resume. Anyone at a terminal may
// pull the cord, mapped to a person or not (the login is recorded): a stop
// only ever makes the system do less.
func (s *Service) Stop(ctx context.Context, osUser, reason string) (StopState, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return StopState{}, invalid("a reason is required: every refused dispatch quotes it")
	}
	if strings.TrimSpace(osUser) == "" {
		return StopState{}, invalid("the OS user is unknown; the stop must record who pulled it")
	}
	// Who pulled it is said by the record, not by the caller's config: a
	// login recorded as exactly one approver's is named as them.
	by := "os:" + osUser
	// A record that cannot be read (the chain does not verify) only costs
	// the name: the stop is recorded under the login.
	var recorded []ApproverRecord
	if ks, err := s.keys(); err == nil {
		if p, err := orgChainProblem(ctx, s.db, ks, s.db, false); err == nil && p == "" {
			recorded, _ = recordedApprovers(ctx, s.db, ks, "")
		}
	}
	var named []string
	for _, a := range recorded {
		if a.identityMatches(Decider{Channel: ChannelTerminal, OSUser: osUser}) {
			named = append(named, a.ID)
		}
	}
	if len(named) == 1 {
		by = named[0]
	}
	now, err := s.now(ctx)
	if err != nil {
		return StopState{}, err
	}
	st := StopState{Active: true, By: by, OSUser: osUser, Reason: reason, Since: now}
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		cur, err := s.stopStatus(ctx, tx)
		if err != nil {
			return err
		}
		// Over a tampered state the stop is recorded (it only makes the
		// system do less) and the store agrees with the receipt again.
		if cur.Active && cur.Tampered == "" {
			return invalid("an org-wide stop is already in force since %s by %s: %q", stamp(cur.Since), cur.By, cur.Reason)
		}
		val, _ := json.Marshal(st)
		if err := store.PutSetting(ctx, tx, stopKey, string(val), now); err != nil {
			return err
		}
		_, err = s.appendEntry(ctx, tx, now, OrgReceiptID, EntryStop, by, withRepair(map[string]any{"reason": reason, "os_user": osUser}, cur.Tampered))
		return err
	})
	if err != nil {
		return StopState{}, err
	}
	// The stop is anchored on this machine now (anchor.go), so a store
	// writer removing it later is found even by a new process.
	s.anchorOrg(ctx)
	return st, nil
}

// Resume lifts the org-wide stop. Unlike Stop it needs a configured person
// at the terminal, because it lets agents act again.
func (s *Service) Resume(ctx context.Context, by Decider, reason string) (StopState, error) {
	if by.Channel != ChannelTerminal {
		return StopState{}, invalid("the stop is lifted only by a person at the terminal (dw resume)")
	}
	now, err := s.now(ctx)
	if err != nil {
		return StopState{}, err
	}
	// Lifting the stop lets agents act again in every domain: it takes a
	// person recorded as an approver of one.
	person, err := s.governor(ctx, nil, by, "lifting the org-wide stop", nil, now)
	if err != nil {
		return StopState{}, err
	}
	var was StopState
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		cur, err := s.stopStatus(ctx, tx)
		if err != nil {
			return err
		}
		if !cur.Active {
			return invalid("no org-wide stop is in force")
		}
		was = cur
		if err := store.DeleteSetting(ctx, tx, stopKey); err != nil {
			return err
		}
		_, err = s.appendEntry(ctx, tx, now, OrgReceiptID, EntryResume, person, withRepair(map[string]any{
			"reason": strings.TrimSpace(reason), "stopped_by": cur.By, "stopped_at": cur.Since, "stop_reason": cur.Reason,
			"evidence": evidenceOf(by),
		}, cur.Tampered))
		return err
	})
	return was, err
}
