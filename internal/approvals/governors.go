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
// like who may decide a proposal: from the approvers recorded in the store,
// matched by the channel's own identity (the OS account by uid), never from
// the config of whoever runs dw. A second local user whose config maps
// their login to an owner, or names themselves one, is not on the record
// and is refused.
//
// The record is the org receipt's approvers entries (the kv rows under
// approvers. are only what records.go compares a new proposal's approvers
// with), read after the org chain verifies. A domain's approvers get on
// record in exactly two ways:
//
//  1. with a proposal an agent records (records.go): the agent's config,
//     the one the organisation deployed, names them;
//  2. by an explicit act of the store admin: dw approvers pin DOMAIN, or
//     the admin's own first governance act on a domain nobody recorded.
//
// The store admin is the store's one trust root, sealed as the org
// receipt's first entry (storeadmin.go): the owner of the SQLite file, or
// for PostgreSQL the account whose process first sealed the org receipt.
// Stores made before that record derive it once (the SQLite file's owner;
// for PostgreSQL the first OS login to lift the stop or change autonomy
// in the org receipt, else the receipt key file's owner) and record it with the
// admin's first act. Anyone else acting on a domain with nothing on record
// is refused with a message naming the admin and the command; no config
// loaded by a caller who is not the admin ever puts a person on record.

// approverKeyPrefix is where recordApprovers keeps each domain's current
// approvers: approvers.<domain>.<class>.
const approverKeyPrefix = "approvers."

// ApproversRecord is what the org receipt records about one domain's
// approvers of one class.
type ApproversRecord struct {
	Domain    string           `json:"domain"`
	Class     Class            `json:"class"`
	Approvers []ApproverRecord `json:"approvers"`
	Seq       int64            `json:"seq" jsonschema:"org receipt entry that recorded them"`
	By        string           `json:"by" jsonschema:"agent (with a proposal) or os:<login> of the store admin"`
	At        time.Time        `json:"at"`
}

// approverRecords reads the latest approvers entry of every domain (or of
// one, when domain is not "") and class from the org receipt, each
// authenticated. The caller has checked the org chain.
func approverRecords(ctx context.Context, q store.Querier, ks *keyset, domain string) ([]ApproversRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+govEntryCols+` FROM receipt_entries
		WHERE receipt_id = ? AND kind = ? ORDER BY seq`, OrgReceiptID, EntryApprovers)
	if err != nil {
		return nil, err
	}
	latest := map[string]rawGovEntry{}
	for rows.Next() {
		r, err := scanRawGovEntry(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		var m struct {
			Domain string `json:"domain"`
			Class  string `json:"class"`
		}
		if json.Unmarshal([]byte(r.payload), &m) != nil || m.Domain == "" || (domain != "" && m.Domain != domain) {
			continue
		}
		latest[m.Domain+"\x00"+m.Class] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]ApproversRecord, 0, len(keys))
	for _, k := range keys {
		e, problem, err := latest[k].check(ctx, q, ks)
		if err != nil {
			return nil, err
		}
		if problem != "" {
			return nil, invalid("the recorded approvers are not genuine: %s; %s", problem, tamperedAdvice)
		}
		rec := ApproversRecord{Domain: e.str("domain"), Class: Class(e.str("class")), Seq: e.seq, By: e.actor, At: e.at}
		raw, _ := json.Marshal(e.payload["approvers"])
		if json.Unmarshal(raw, &rec.Approvers) != nil {
			return nil, invalid("org receipt entry %d records unreadable approvers for %s; %s", e.seq, rec.Domain, tamperedAdvice)
		}
		out = append(out, rec)
	}
	return out, nil
}

// recordedApprovers merges the approvers recorded for one domain (every
// domain when domain is ""), first person first, without repeats.
func recordedApprovers(ctx context.Context, q store.Querier, ks *keyset, domain string) ([]ApproverRecord, error) {
	recs, err := approverRecords(ctx, q, ks, domain)
	if err != nil {
		return nil, err
	}
	var out []ApproverRecord
	for _, rec := range recs {
		for _, a := range rec.Approvers {
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
	return out, nil
}

func uniqSorted(xs []string) []string {
	sort.Strings(xs)
	return slices.Compact(xs)
}

// pinApprovers records, as an act of the store admin, the approvers the
// config names now for each domain (standard: its approvers; live: its
// first owner) whose recorded ones differ, in the org receipt, with the
// admin record first when the admin was derived. It returns the records
// written.
func (s *Service) pinApprovers(ctx context.Context, domains []*config.Domain, by Decider, admin StoreAdmin, why, reason string, now time.Time) ([]ApproversRecord, error) {
	ks, err := s.keys()
	if err != nil {
		return nil, err
	}
	var out []ApproversRecord
	err = s.db.InTx(ctx, func(tx *store.Tx) error {
		out = nil
		// The records read above may be stale by now: checked again here,
		// the chain too.
		if p, err := orgChainProblem(ctx, tx, ks, s.db, false); err != nil || p != "" {
			if p != "" {
				return invalid("%s is refused: %s; %s", why, chainFailure(p), tamperedAdvice)
			}
			return err
		}
		if !admin.Recorded {
			if err := writeAdmin(ctx, tx, ks, now, admin); err != nil {
				return err
			}
		}
		for _, d := range domains {
			have, err := approverRecords(ctx, tx, ks, d.Name)
			if err != nil {
				return err
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
				facts := map[string]any{
					"domain": d.Name, "class": class, "approvers": json.RawMessage(body), "pinned_by": "store admin",
					"act": why, "reason": reason, "config": s.cfg.Source, "evidence": evidenceOf(by),
				}
				if i := slices.IndexFunc(have, func(r ApproversRecord) bool { return r.Class == class }); i >= 0 {
					prev, err := canonicalJSON(have[i].Approvers)
					if err != nil {
						return err
					}
					if prev == body {
						continue
					}
					facts["previous"] = json.RawMessage(prev)
				}
				e, err := appendReceipt(ctx, tx, ks, now, OrgReceiptID, EntryApprovers, "os:"+by.OSUser, facts)
				if err != nil {
					return err
				}
				// Kept in step for records.go, which compares a new
				// proposal's approvers with this row.
				if err := store.PutSetting(ctx, tx, approverKeyPrefix+d.Name+"."+string(class), body, now); err != nil {
					return err
				}
				out = append(out, ApproversRecord{Domain: d.Name, Class: class, Approvers: snap, Seq: e.Seq, By: e.Actor, At: e.At})
			}
		}
		return nil
	})
	return out, err
}

// PinDomain records, as an explicit act of the store admin, the
// approvers the config in force names for domain, replacing those on
// record (the change is in the org receipt with what it replaced). Only
// the store admin at the terminal may: a config loaded by anyone else
// never puts a person on record.
func (s *Service) PinDomain(ctx context.Context, domain string, by Decider, reason string) ([]ApproversRecord, error) {
	d, err := Domain(s.cfg, domain)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(reason) == "" {
		return nil, invalid("a reason is required: who may approve a domain is recorded for auditors")
	}
	if by.Channel != ChannelTerminal || strings.TrimSpace(by.OSUser) == "" {
		return nil, invalid("approvers are pinned only by the store admin at the terminal (dw approvers pin), under a named OS account")
	}
	now, err := s.now(ctx)
	if err != nil {
		return nil, err
	}
	admin, err := s.checkedAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if !admin.is(by) {
		return nil, invalid("only the store admin, %s (%s), may pin a domain's approvers; OS user %q is not, and the config you loaded does not count. "+
			"Ask the admin to run: dw approvers pin %s --reason …", admin, admin.How, by.OSUser, d.Name)
	}
	recs, err := s.pinApprovers(ctx, []*config.Domain{d}, by, admin, "pinning approvers", reason, now)
	if err != nil {
		return nil, err
	}
	// None written: the record already says what the config says.
	return recs, nil
}

// DomainRecords lists the approvers the org receipt records, for one domain
// or (domain "") every domain.
func (s *Service) DomainRecords(ctx context.Context, domain string) ([]ApproversRecord, error) {
	ks, err := s.keys()
	if err != nil {
		return nil, err
	}
	if p, err := orgChainProblem(ctx, s.db, ks, s.db, false); err != nil || p != "" {
		if p != "" {
			return nil, invalid("%s; %s", chainFailure(p), tamperedAdvice)
		}
		return nil, err
	}
	return approverRecords(ctx, s.db, ks, domain)
}

// checkedAdmin is the store admin after a full walk of the org chain.
func (s *Service) checkedAdmin(ctx context.Context) (StoreAdmin, error) {
	ks, err := s.keys()
	if err != nil {
		return StoreAdmin{}, err
	}
	if p, err := orgChainProblem(ctx, s.db, ks, s.db, true); err != nil || p != "" {
		if p != "" {
			return StoreAdmin{}, invalid("%s; %s", chainFailure(p), tamperedAdvice)
		}
		return StoreAdmin{}, err
	}
	return s.storeAdmin(ctx, s.db, ks)
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
// recorded for domain (for every domain, org-wide, when it is nil). Where
// none are recorded, only the store admin may act: the admin's act
// records them from the admin's config first. eligible, when not nil,
// narrows who may act (a domain's owners); the person the caller's config
// names only breaks a tie when one login stands for several recorded
// people. It returns "" when the caller is recorded but not eligible.
func (s *Service) governor(ctx context.Context, domain *config.Domain, by Decider, what string, eligible func(id string) bool, now time.Time) (string, error) {
	if by.Channel != ChannelTerminal {
		return "", invalid("%s is done only by a person at the terminal, not via %s", what, by.Channel)
	}
	if strings.TrimSpace(by.OSUser) == "" {
		return "", invalid("the OS account running dw is unknown; %s needs a named account", what)
	}
	ks, err := s.keys()
	if err != nil {
		return "", err
	}
	// A governance act is rare: the chain is walked whole, so nothing this
	// process verified earlier is taken on trust.
	if p, err := orgChainProblem(ctx, s.db, ks, s.db, true); err != nil || p != "" {
		if p != "" {
			return "", invalid("%s is refused: %s; %s", what, chainFailure(p), tamperedAdvice)
		}
		return "", err
	}
	name := ""
	if domain != nil {
		name = domain.Name
	}
	recorded, err := recordedApprovers(ctx, s.db, ks, name)
	if err != nil {
		return "", err
	}
	scope := "any domain"
	if domain != nil {
		scope = "domain " + domain.Name
	}
	var pin []*config.Domain
	var admin StoreAdmin
	if len(recorded) == 0 {
		// Nothing on record for this scope: only the store admin may put
		// people on record, and then from the admin's config. Org-wide
		// that is every domain, and only while the store records no
		// approvers at all.
		admin, err = s.storeAdmin(ctx, s.db, ks)
		if err != nil {
			return "", err
		}
		if !admin.is(by) {
			how := "dw approvers pin DOMAIN --reason …"
			if domain != nil {
				how = "dw approvers pin " + domain.Name + " --reason …"
			}
			none := "domain " + name + " has no approvers recorded in this store"
			if domain == nil {
				none = "no domain has approvers recorded in this store"
			}
			return "", invalid("%s is refused: %s. Approvers are recorded with a domain's first proposal, "+
				"or by the store admin, %s (%s), running: %s. OS user %q is not the store admin, and the config you loaded does not count",
				what, none, admin, admin.How, how, by.OSUser)
		}
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
		if _, err := s.pinApprovers(ctx, pin, by, admin, what, "the store admin's first governance act on "+scope, now); err != nil {
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
