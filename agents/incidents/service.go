package incidents

import (
	"context"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// env is what one tool call works with: the store, the context graph, the
// incidents library over both, and the approvals core.
type env struct {
	db    *store.DB
	graph *lineage.Graph
	svc   *incidents.Service
	log   *changelog.Log
	apv   *approvals.Service
}

// env builds the services for one call. Only the graph is kept between
// calls (its index is costly to load); the rest is cheap to build.
func (h *handlers) env(ctx context.Context) (*env, error) {
	db, err := h.d.Store(ctx)
	if err != nil {
		return nil, err
	}
	g, err := h.d.Graph(ctx)
	if err != nil {
		return nil, err
	}
	svc := &incidents.Service{
		DB:    db,
		Clock: h.d.Clock,
		Graph: incidents.LineageGraph(g, lineage.NamesFromConfig(h.d.Config)),
		OpenWarehouse: func(ctx context.Context, name string) (warehouse.Warehouse, error) {
			return h.d.Warehouse(ctx, name)
		},
	}
	return &env{db: db, graph: g, svc: svc, log: &changelog.Log{DB: db, Clock: h.d.Clock}, apv: approvals.New(db, h.d.Config, h.d.Clock, ownerLookup(g))}, nil
}

// ownerLookup names an asset's owner as the context graph records it, for
// approvals to fall back on when a domain names no owners.
func ownerLookup(g *lineage.Graph) approvals.OwnerLookup {
	return func(ctx context.Context, asset string) (string, bool) {
		res, err := g.Owners(ctx, lineage.OwnersParams{Assets: []string{asset}})
		if err != nil || len(res.Assets) == 0 || res.Assets[0].Owner == "" {
			return "", false
		}
		return res.Assets[0].Owner, true
	}
}

// caller names who is behind this agent's client, as the OS login running
// the process (the evidence the terminal and elicitation channels use):
// "Sam Okafor (sam), OS user sam", or "OS user x" for a login mapped to no
// person, "" when the uid has no login.
func (h *handlers) caller() string {
	login := config.CurrentOSUser()
	if login == "" {
		return ""
	}
	if p, ok := h.d.Config.PersonForOSUser(login); ok {
		return h.personLabel(p.ID) + ", OS user " + login
	}
	return "OS user " + login
}

// personLabel is "Sam Okafor (sam)" for a configured person, else the id.
func (h *handlers) personLabel(id string) string { return approvals.PersonLabel(h.d.Config, id) }

// decideHow says how a person records a decision on a proposal: the
// terminal always, Slack when it is configured.
func (h *handlers) decideHow(p *approvals.Proposal) string {
	who := h.personLabel(p.Approver)
	ways := []string{fmt.Sprintf("%s runs `dw approve %s` (or `dw reject %s --reason …`) as their own OS login", who, p.ID, p.ID)}
	if h.d.Config.Slack != nil {
		ways = append(ways, "or answers the request posted to them in Slack (`dw approvals listen` posts it)")
	}
	return strings.Join(ways, ", ")
}
