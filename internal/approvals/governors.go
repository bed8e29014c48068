package approvals

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// Who may change a domain's autonomy or lift the org-wide stop is decided
// like who may decide a proposal: from the approvers recorded in the store
// (with each proposal, records.go), matched by the channel's own identity
// (the OS account by uid), never from the config of whoever runs dw. A
// second local user whose config maps their login to an owner, or names
// themselves one, is not on the record and is refused.
//
// A domain no proposal has recorded approvers for yet has them recorded
// from the config in force the first time a person acts on it, in the org
// receipt like any change of approvers; from then on that record holds.

// approverKeyPrefix is where recordApprovers keeps each domain's current
// approvers: approvers.<domain>.<class>.
const approverKeyPrefix = "approvers."

// recordedApprovers reads the approvers recorded for one domain, or for
// every domain when domain is "", first person first, without repeats.
func recordedApprovers(ctx context.Context, q store.Querier, domain string) ([]ApproverRecord, error) {
	pattern := approverKeyPrefix + "%"
	if domain != "" {
		pattern = approverKeyPrefix + domain + ".%"
	}
	rows, err := q.QueryContext(ctx, `SELECT key, value FROM kv WHERE key LIKE ? ORDER BY key`, pattern)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ApproverRecord
	for rows.Next() {
		var key, v string
		if err := rows.Scan(&key, &v); err != nil {
			return nil, err
		}
		// LIKE treats _ as a wildcard, and domain a's pattern also matches
		// domain a.b's keys: keep approvers.<domain>.<class> exactly.
		if cls, ok := strings.CutPrefix(key, approverKeyPrefix+domain+"."); domain != "" && (!ok || strings.Contains(cls, ".")) {
			continue
		}
		var snap []ApproverRecord
		if json.Unmarshal([]byte(v), &snap) != nil {
			continue
		}
		for _, a := range snap {
			if i := slices.IndexFunc(out, func(r ApproverRecord) bool { return r.ID == a.ID }); i >= 0 {
				// The same person recorded twice (two classes, or a login
				// added since): any recorded identity is theirs.
				out[i].OSUsers = uniqSorted(append(out[i].OSUsers, a.OSUsers...))
				if out[i].SlackID == "" {
					out[i].SlackID = a.SlackID
				}
				continue
			}
			out = append(out, a)
		}
	}
	return out, rows.Err()
}

func uniqSorted(xs []string) []string {
	sort.Strings(xs)
	return slices.Compact(xs)
}

// pinApprovers records, for each domain with no approvers on record, the
// approvers its config names now (standard: its approvers; live: its first
// owner), in the org receipt, as recordApprovers does for a proposal.
func (s *Service) pinApprovers(ctx context.Context, domains []*config.Domain, actor, why string, now time.Time) error {
	ks, err := s.keys()
	if err != nil {
		return err
	}
	return s.db.InTx(ctx, func(tx *store.Tx) error {
		for _, d := range domains {
			have, err := recordedApprovers(ctx, tx, d.Name)
			if err != nil {
				return err
			}
			if len(have) > 0 {
				continue
			}
			orders := configOrders(d)
			for _, class := range []Class{ClassStandard, ClassLive} {
				if len(orders[class]) == 0 {
					continue
				}
				snap, err := snapshotApprovers(s.cfg, orders[class])
				if err != nil {
					return err
				}
				body, err := canonicalJSON(snap)
				if err != nil {
					return err
				}
				if _, err := appendReceipt(ctx, tx, ks, now, OrgReceiptID, EntryApprovers, actor, map[string]any{
					"domain": d.Name, "class": class, "approvers": json.RawMessage(body), "first_recorded_by": why, "config": s.cfg.Source,
				}); err != nil {
					return err
				}
				if err := store.PutSetting(ctx, tx, approverKeyPrefix+d.Name+"."+string(class), body, now); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// configOrders are the approver orders the config gives a domain's
// classes now, as Propose would ask them (approverOrder).
func configOrders(d *config.Domain) map[Class][]string {
	orders := map[Class][]string{}
	if len(d.Approvers) > 0 {
		orders[ClassStandard] = d.Approvers
	}
	if len(d.Owners) > 0 {
		orders[ClassLive] = d.Owners[:1]
	}
	return orders
}

// governor finds the person acting at the terminal among the approvers
// recorded for domain (for every domain, org-wide, when it is nil),
// recording them (once the act is allowed) where none are. eligible, when
// not nil, narrows who may act (a domain's owners); the person the
// caller's config names only breaks a tie when one login stands for
// several recorded people. It returns "" when the caller is recorded but
// not eligible.
func (s *Service) governor(ctx context.Context, domain *config.Domain, by Decider, what string, eligible func(id string) bool, now time.Time) (string, error) {
	if by.Channel != ChannelTerminal {
		return "", invalid("%s is done only by a person at the terminal, not via %s", what, by.Channel)
	}
	if strings.TrimSpace(by.OSUser) == "" {
		return "", invalid("the OS account running dw is unknown; %s needs a named account", what)
	}
	actor := "os:" + by.OSUser
	name := ""
	if domain != nil {
		name = domain.Name
	}
	recorded, err := recordedApprovers(ctx, s.db, name)
	if err != nil {
		return "", err
	}
	var pin []*config.Domain
	if len(recorded) == 0 {
		// Nothing on record yet for this scope: what the config names now
		// is recorded, once the act is allowed. Org-wide that is every
		// domain, but only while the store records no approvers at all,
		// so a config naming a domain of one's own cannot add a person
		// who may lift the stop.
		pin = []*config.Domain{domain}
		if domain == nil {
			pin = pin[:0]
			for i := range s.cfg.Domains {
				pin = append(pin, &s.cfg.Domains[i])
			}
		}
		for _, d := range pin {
			orders := configOrders(d)
			for _, class := range []Class{ClassStandard, ClassLive} {
				if len(orders[class]) == 0 {
					continue
				}
				snap, err := snapshotApprovers(s.cfg, orders[class])
				if err != nil {
					return "", err
				}
				for _, a := range snap {
					if !slices.ContainsFunc(recorded, func(r ApproverRecord) bool { return r.ID == a.ID }) {
						recorded = append(recorded, a)
					}
				}
			}
		}
	}
	var matching []string
	for _, r := range recorded {
		if r.identityMatches(by) {
			matching = append(matching, r.ID)
		}
	}
	scope := "any domain"
	if domain != nil {
		scope = "domain " + domain.Name
	}
	if len(matching) == 0 {
		return "", invalid("OS user %q is not a recorded identity of any approver of %s (recorded: %s); %s follows the approvers recorded in the store, not the config of whoever runs dw",
			by.OSUser, scope, orNoneRecorded(recorded), what)
	}
	if by.PersonID != "" && !slices.Contains(matching, by.PersonID) {
		// The caller named someone (their config's mapping of the login)
		// the record does not give this login to.
		if _, ok := s.cfg.Person(by.PersonID); !ok {
			return "", invalid("%q is not a person in the config; %s is done only by people (agents cannot)", by.PersonID, what)
		}
		return "", invalid("OS user %q is not %s's recorded identity (recorded for %s: %s); %s follows the approvers recorded in the store, not the config of whoever runs dw",
			by.OSUser, by.PersonID, scope, describeSnapshot(recorded), what)
	}
	if eligible != nil {
		matching = slices.DeleteFunc(matching, func(id string) bool { return !eligible(id) })
		if len(matching) == 0 {
			return "", nil
		}
	}
	person := matching[0]
	if by.PersonID != "" {
		if !slices.Contains(matching, by.PersonID) {
			return "", nil // recorded, but not eligible (not an owner)
		}
		person = by.PersonID
	}
	if len(pin) > 0 {
		if err := s.pinApprovers(ctx, pin, actor, what, now); err != nil {
			return "", err
		}
	}
	return person, nil
}

func orNoneRecorded(rs []ApproverRecord) string {
	if len(rs) == 0 {
		return "nobody"
	}
	return describeSnapshot(rs)
}
