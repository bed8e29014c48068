package approvals

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"

	"github.com/dataworkers/dw/internal/store"
)

// An agent's config names a domain's approvers, but on a shared store a
// second local user with write access (and the shared receipt key) can
// start an agent with her own DW_CONFIG. If every proposal re-recorded the
// approvers its config names, she would make herself the approver of
// any domain, approve her own run, and then govern the domain. So an
// agent's config puts approvers on record (the first time, or changed)
// only when the agent process runs as the store admin's account
// (storeadmin.go). Any other agent's proposal goes to the approvers
// already on record; a config that differs is recorded as a note in the
// org receipt, which the admin accepts with dw approvers pin DOMAIN; with
// nobody on record the proposal is refused, naming the admin and the
// command.

// EntryApproversDiffer notes, in the org receipt, a proposal whose agent's
// config names other approvers than the record while the agent does not
// run as the store admin: nothing changes until the admin pins them.
const EntryApproversDiffer = "approvers_differ"

// processUID is the uid this process runs as; tests replace it.
var processUID = os.Getuid

// runsAsProcess reports whether this process runs as the admin's account:
// the same uid, or the same login looked up by uid when the record names
// no uid.
func (a StoreAdmin) runsAsProcess() bool {
	uid := strconv.Itoa(processUID())
	if a.UID != "" {
		return a.UID == uid
	}
	if a.OSUser == "" {
		return false
	}
	u, err := lookupUID(uid)
	return err == nil && u != nil && u.Username == a.OSUser
}

// proposalAdmin is the admin a proposal is judged against: the store's,
// or, on a store whose org receipt is still empty, the founding admin this
// very proposal will seal (the SQLite file's owner, else this process).
func (s *Service) proposalAdmin(ctx context.Context, q store.Querier, ks *keyset) (StoreAdmin, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM receipt_entries WHERE receipt_id = ?`, OrgReceiptID).Scan(&n); err != nil {
		return StoreAdmin{}, err
	}
	if n == 0 {
		return foundingAdmin(ctx, q), nil
	}
	return s.storeAdmin(ctx, q, ks)
}

// approverRoute is who a proposal goes to and what its recording writes.
type approverRoute struct {
	order []string
	snap  []ApproverRecord
	body  string
	// record: the config's approvers go on record (the agent runs as the
	// store admin and they differ from the record, or none is recorded).
	record bool
	// previous is the recorded approvers' JSON when record replaces them.
	previous string
	// differ is the config's approvers' JSON when they differ from the
	// record but the agent is not the admin: noted, not recorded.
	differ string
	admin  StoreAdmin
}

// routeApprovers decides who a proposal of domain/class is put to, given
// the order the agent's config names. q is the DB (prepare) or the
// proposal's transaction (record), which checks again.
func (s *Service) routeApprovers(ctx context.Context, q store.Querier, ks *keyset, domain string, class Class, cfgOrder []string) (approverRoute, error) {
	if p, err := orgChainProblem(ctx, q, ks, s.db, false); err != nil || p != "" {
		if p != "" {
			return approverRoute{}, invalid("a proposal is refused: %s; %s", chainFailure(p), chainAdvice)
		}
		return approverRoute{}, err
	}
	snap, err := snapshotApprovers(s.cfg, cfgOrder)
	if err != nil {
		return approverRoute{}, err
	}
	body, err := canonicalJSON(snap)
	if err != nil {
		return approverRoute{}, err
	}
	recs, err := approverRecords(ctx, q, ks, domain)
	if err != nil {
		return approverRoute{}, err
	}
	var rec *ApproversRecord
	if i := slices.IndexFunc(recs, func(r ApproversRecord) bool { return r.Class == class }); i >= 0 {
		rec = &recs[i]
	}
	prev := ""
	if rec != nil {
		if prev, err = canonicalJSON(rec.Approvers); err != nil {
			return approverRoute{}, err
		}
		if prev == body {
			return approverRoute{order: cfgOrder, snap: snap, body: body}, nil
		}
	}
	admin, err := s.proposalAdmin(ctx, q, ks)
	var ie *InputError
	switch {
	case err != nil && errors.As(err, &ie) && rec != nil:
		// No admin can be named (a PostgreSQL store made before admins
		// were recorded, its key from the environment): nobody's config
		// replaces the record; the proposal goes to those on it.
		admin = StoreAdmin{How: "none can be derived: " + err.Error()}
	case err != nil:
		return approverRoute{}, err
	}
	if admin.runsAsProcess() {
		return approverRoute{order: cfgOrder, snap: snap, body: body, record: true, previous: prev, admin: admin}, nil
	}
	if rec == nil || len(rec.Approvers) == 0 {
		return approverRoute{}, invalid("domain %s has no %s approvers recorded in this store, and this agent runs as uid %d, not as the store admin, %s (%s): "+
			"approvers named by an agent's config go on record only when the agent runs as the store admin. "+
			"Ask the admin to run: dw approvers pin %s --reason …, or to start the agent under the admin's account",
			domain, class, processUID(), admin, admin.How, domain)
	}
	order := make([]string, 0, len(rec.Approvers))
	for _, a := range rec.Approvers {
		order = append(order, a.ID)
	}
	return approverRoute{order: order, snap: rec.Approvers, body: prev, differ: body, admin: admin}, nil
}

// routedOrder is the approver order a new proposal is put to (see
// routeApprovers), read before the proposal's transaction.
func (s *Service) routedOrder(ctx context.Context, domain string, class Class, cfgOrder []string) ([]string, error) {
	ks, err := s.keys()
	if err != nil {
		return nil, err
	}
	r, err := s.routeApprovers(ctx, s.db, ks, domain, class, cfgOrder)
	if err != nil {
		return nil, err
	}
	return r.order, nil
}
