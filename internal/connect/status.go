package connect

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/page"
)

// MaxTrace bounds one failure trace in a status page: the cause is at the
// top of a Java stack trace, and the Connect REST API keeps the whole of
// it.
const MaxTrace = 4000

// MaxLineageListed bounds each list of what a status read recorded: the
// recording covers every connector on the cluster, not one page, so a
// cluster of thousands would otherwise list thousands of names on every
// page.
const MaxLineageListed = 50

// maxReason bounds one skipped hop's reason (an error's text).
const maxReason = 500

// SkippedHop is a topic-table hop that could not be recorded in the
// context graph.
type SkippedHop struct {
	Connector string
	Topic     string
	Reason    string
}

// RecordedLineage says what a status read wrote to the context graph:
// the first MaxLineageListed names of each list, sorted, and the totals.
type RecordedLineage struct {
	Recorded      []string
	RecordedTotal int
	AssetsCreated int
	EdgesCreated  int
	Skipped       []SkippedHop
	SkippedTotal  int
}

// StatusPage is one page of connectors by name, with the health counts
// over every connector and the hops recorded for every connector.
type StatusPage struct {
	Worker       string
	Connectors   []ConnectorReport
	HealthCounts map[string]int
	Lineage      RecordedLineage
	page.Info
}

// StatusPage reads the connectors p selects (Report), records every
// connector's topic <-> table hops in the context graph (cluster names the
// Kafka cluster in topic ids), and returns the page pg asks for with each
// trace cut to MaxTrace. The graph is opened only once the cluster has
// answered. It never changes a connector.
func (c *Client) StatusPage(ctx context.Context, p StatusParams, graph func(context.Context) (*lineage.Graph, error), cluster string, pg page.Page) (*StatusPage, error) {
	rep, err := c.Report(ctx, p, nil)
	if err != nil {
		return nil, err
	}
	g, err := graph(ctx)
	if err != nil {
		return nil, err
	}
	return PageReport(ctx, rep, g, cluster, pg), nil
}

// PageReport records a status report's hops in g and pages it.
func PageReport(ctx context.Context, rep *StatusReport, g *lineage.Graph, cluster string, pg page.Page) *StatusPage {
	out := &StatusPage{Worker: rep.Worker, HealthCounts: map[string]int{}}
	out.Lineage = recordHops(ctx, g, rep.Connectors, cluster)
	for _, cr := range rep.Connectors {
		out.HealthCounts[cr.Health]++
	}
	all := slices.Clone(rep.Connectors)
	slices.SortStableFunc(all, func(a, b ConnectorReport) int { return strings.Compare(a.Name, b.Name) })
	// Offset-paged: the connectors are the Connect worker's answer to this
	// call, not rows in the store (see package page).
	out.Connectors, out.Info = page.Slice(pg, all)
	for i := range out.Connectors {
		cr := &out.Connectors[i]
		cr.Trace = cutTrace(cr.Trace)
		cr.Tasks = slices.Clone(cr.Tasks)
		for j := range cr.Tasks {
			cr.Tasks[j].Trace = cutTrace(cr.Tasks[j].Trace)
		}
	}
	return out
}

// Summary is the page for a person: the listed connectors' states, the
// paging, and what was recorded in the context graph.
func (s *StatusPage) Summary() string {
	var b strings.Builder
	b.WriteString((&StatusReport{Worker: s.Worker, Connectors: s.Connectors}).Summary())
	if s.NextCursor != "" {
		fmt.Fprintf(&b, "\n%d of %d connectors listed; pass next_cursor as cursor for more.", len(s.Connectors), s.Total)
	}
	fmt.Fprintf(&b, "\nContext graph: %d connectors' hops recorded", s.Lineage.RecordedTotal)
	if n := s.Lineage.SkippedTotal; n > 0 {
		fmt.Fprintf(&b, ", %d hops skipped (see lineage.skipped)", n)
	}
	return b.String()
}

func cutTrace(s string) string {
	if len(s) <= MaxTrace {
		return s
	}
	return strings.ToValidUTF8(s[:MaxTrace], "") + fmt.Sprintf("\n… %d more characters (GET /connectors/<name>/status on the Connect worker has the whole trace)", len(s)-MaxTrace)
}

// recordHops writes each connector's hops to the context graph. Each
// connector is imported on its own, so one whose table platform cannot be
// told from its class does not keep the others out.
func recordHops(ctx context.Context, g *lineage.Graph, connectors []ConnectorReport, cluster string) RecordedLineage {
	l := RecordedLineage{Recorded: []string{}}
	for _, cr := range connectors {
		var specs []ingest.ConnectorSpec
		for _, f := range cr.Flows {
			switch {
			case f.TopicPattern:
				l.Skipped = append(l.Skipped, SkippedHop{Connector: cr.Name, Topic: f.Topic,
					Reason: "topics.regex matched no topic this tool knows of; the hop is recorded once the connector's topics are listed in topics"})
				continue
			case f.Table == "":
				l.Skipped = append(l.Skipped, SkippedHop{Connector: cr.Name, Topic: f.Topic,
					Reason: "the connector's config names no table this tool can read (class " + cr.Class + ")"})
				continue
			}
			specs = append(specs, ingest.ConnectorSpec{Name: cr.Name, Class: cr.Class, Direction: cr.Type, Topic: f.Topic, Table: f.Table})
		}
		if len(specs) == 0 {
			if len(cr.Flows) == 0 {
				l.Skipped = append(l.Skipped, SkippedHop{Connector: cr.Name,
					Reason: "no topic or table could be read from the connector's config"})
			}
			continue
		}
		stats, err := ingest.Connectors(ctx, g, specs, ingest.ConnectorOptions{Cluster: cluster})
		if err != nil {
			l.Skipped = append(l.Skipped, SkippedHop{Connector: cr.Name, Reason: err.Error()})
			continue
		}
		l.Recorded = append(l.Recorded, cr.Name)
		l.AssetsCreated += stats.AssetsCreated
		l.EdgesCreated += stats.EdgesCreated
	}
	l.capLists()
	return l
}

// capLists keeps the first MaxLineageListed of each list, with totals.
func (l *RecordedLineage) capLists() {
	l.RecordedTotal, l.SkippedTotal = len(l.Recorded), len(l.Skipped)
	slices.Sort(l.Recorded)
	if len(l.Recorded) > MaxLineageListed {
		l.Recorded = l.Recorded[:MaxLineageListed:MaxLineageListed]
	}
	if len(l.Skipped) > MaxLineageListed {
		l.Skipped = l.Skipped[:MaxLineageListed:MaxLineageListed]
	}
	for i := range l.Skipped {
		if r := l.Skipped[i].Reason; len(r) > maxReason {
			l.Skipped[i].Reason = strings.ToValidUTF8(r[:maxReason], "") + "…"
		}
	}
}
