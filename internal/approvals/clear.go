package approvals

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/dataworkers/dw/internal/store"
)

// clearUnconfigured clears a level the store holds for a domain the
// config does not name: a kv row written outside Data Workers, or a level
// set for a domain since removed from the config. Dispatch never reads
// it (it acts only on configured domains), but verify reports it for ever
// until it is cleared, and a domain of that name added later would
// inherit it. Only a recorded approver of the domain or the store admin
// may clear it; the clearing is an autonomy reset in the org receipt.
// ok is false when the store holds nothing for the domain.
func (s *Service) clearUnconfigured(ctx context.Context, domain string, by Decider, reason string) (li LevelInfo, ok bool, err error) {
	domain = strings.TrimSpace(domain)
	if domain == "" {
		return li, false, nil
	}
	ks, err := s.keys()
	if err != nil {
		return li, false, err
	}
	_, _, held, err := store.GetSetting(ctx, s.db, autonomyKey(domain))
	if err != nil {
		return li, false, err
	}
	o, set, problem, err := readLevel(ctx, s.db, ks, s.db, domain)
	if err != nil {
		return li, false, err
	}
	if !held && !set && problem == "" {
		return li, false, nil
	}
	if by.Channel != ChannelTerminal || strings.TrimSpace(by.OSUser) == "" {
		return li, true, invalid("a stored level is cleared only by a person at the terminal (dw autonomy reset), under a named OS account")
	}
	if strings.TrimSpace(reason) == "" {
		return li, true, invalid("a reason is required: the change is recorded for auditors")
	}
	if p, err := orgChainProblem(ctx, s.db, ks, s.db, true); err != nil || p != "" {
		if p != "" {
			return li, true, invalid("clearing %s's level is refused: %s; %s", domain, chainFailure(p), tamperedAdvice)
		}
		return li, true, err
	}
	recorded, err := recordedApprovers(ctx, s.db, ks, domain)
	if err != nil {
		return li, true, err
	}
	actor := ""
	for _, a := range recorded {
		if a.identityMatches(by) {
			actor = a.ID
			break
		}
	}
	if actor == "" {
		admin, err := s.storeAdmin(ctx, s.db, ks)
		if err != nil {
			return li, true, err
		}
		if !admin.is(by) {
			return li, true, invalid("domain %s is not in the config, but the store holds a level for it; it is cleared only by its recorded approvers (%s) or the store admin, %s (%s); OS user %q is neither",
				domain, orNoneRecorded(recorded), admin, admin.How, by.OSUser)
		}
		actor = "os:" + by.OSUser
	}
	now, err := s.now(ctx)
	if err != nil {
		return li, true, err
	}
	from := "unset"
	if set {
		from = o.Level
	} else if raw, _, had, err := store.GetSetting(ctx, s.db, autonomyKey(domain)); err == nil && had {
		var c levelOverride
		if json.Unmarshal([]byte(raw), &c) == nil && c.Level != "" {
			from = c.Level + " (not recorded)"
		}
	}
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		if err := store.DeleteSetting(ctx, tx, autonomyKey(domain)); err != nil {
			return err
		}
		_, err := s.appendEntry(ctx, tx, now, OrgReceiptID, EntryAutonomy, actor, withRepair(map[string]any{
			"domain": domain, "from": from, "to": "", "reason": reason, "reset": true, "not_configured": true,
			"channel": by.Channel, "evidence": evidenceOf(by),
		}, problem))
		return err
	})
	if err != nil {
		return li, true, err
	}
	return LevelInfo{Domain: domain, Source: "cleared", SetBy: actor, SetAt: now, Reason: reason}, true, nil
}
