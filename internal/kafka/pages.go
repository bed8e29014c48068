package kafka

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dataworkers/dw/internal/page"
)

// LagPage is one page of a lag round's groups, by name, with the status
// counts over every group. A group on a 1,000-partition topic is judged on
// all of them but lists only its most lagging, so a page stays small.
type LagPage struct {
	Report       *LagReport
	Groups       []PagedGroup
	StatusCounts map[string]int
	page.Info
}

// PagedGroup is a group's report with its partitions cut to the most
// lagging, and how many it has in all.
type PagedGroup struct {
	GroupReport
	PartitionsTotal int
	// Whole is the group with every partition, for what is worked out
	// from all its members (the client ids that name its job).
	Whole GroupReport
}

// ConsumerLagPage reads, records and judges one round (ConsumerLag) and
// returns the page pg asks for, each group listing at most partitions
// partitions, most lagging first.
func (m *Monitor) ConsumerLagPage(ctx context.Context, f LagFilter, pg page.Page, partitions int) (*LagPage, error) {
	rep, err := m.ConsumerLag(ctx, f)
	if err != nil {
		return nil, err
	}
	return rep.Page(pg, partitions), nil
}

// Page cuts the report to one page of groups by name; each keeps its own
// partition order unless it has more than partitions, when the most
// lagging are kept (ties in their reported order).
func (r *LagReport) Page(pg page.Page, partitions int) *LagPage {
	out := &LagPage{Report: r, Groups: []PagedGroup{}, StatusCounts: map[string]int{}}
	groups := slices.Clone(r.Groups)
	slices.SortFunc(groups, func(a, b GroupReport) int { return strings.Compare(a.Group, b.Group) })
	for _, g := range groups {
		out.StatusCounts[string(g.Status)]++
	}
	// Offset-paged: the groups are the cluster's answer to this call, not
	// rows in the store (see package page on which lists page by key).
	groups, out.Info = page.Slice(pg, groups)
	for _, g := range groups {
		pgr := PagedGroup{GroupReport: g, PartitionsTotal: len(g.Partitions), Whole: g}
		if len(g.Partitions) > partitions {
			parts := slices.Clone(g.Partitions)
			slices.SortStableFunc(parts, func(a, b PartitionReport) int { return cmp.Compare(b.Lag, a.Lag) })
			pgr.Partitions = parts[:partitions]
		}
		out.Groups = append(out.Groups, pgr)
	}
	return out
}

// HealthPage is one page of topics, critical first, then warning (or
// unreadable), then ok, by name within each, with the counts over all.
type HealthPage struct {
	Topics       []TopicHealth
	HealthCounts map[string]int
	// Checked and Problems count every topic, not only this page's.
	Checked  int
	Problems int
	page.Info
}

// TopicHealthPage checks the topics p names (TopicHealth) and returns the
// page pg asks for, worst first.
func (c *Client) TopicHealthPage(ctx context.Context, p HealthParams, pg page.Page) (*HealthPage, error) {
	rep, err := c.TopicHealth(ctx, p)
	if err != nil {
		return nil, err
	}
	return rep.Page(pg), nil
}

// healthRank orders topics worst first: critical, then anything not ok
// (a topic whose configs could not be read included), then ok.
func healthRank(t TopicHealth) int {
	switch {
	case t.Health == HealthCritical:
		return 0
	case t.Health != HealthOK || t.Error != "":
		return 1
	}
	return 2
}

// Page cuts the report to one page of topics, worst first.
func (r *HealthReport) Page(pg page.Page) *HealthPage {
	topics := slices.Clone(r.Topics)
	slices.SortFunc(topics, func(a, b TopicHealth) int {
		return cmp.Or(cmp.Compare(healthRank(a), healthRank(b)), strings.Compare(a.Topic, b.Topic))
	})
	out := &HealthPage{HealthCounts: map[string]int{}, Checked: len(topics)}
	for _, t := range topics {
		out.HealthCounts[t.Health]++
		if healthRank(t) < 2 {
			out.Problems++
		}
	}
	// Offset-paged: the topics are the cluster's answer to this call, and
	// their order moves with their health anyway.
	out.Topics, out.Info = page.Slice(pg, topics)
	return out
}

// Summary is the page for a person: the counts over every topic, then
// the issues of this page's topics only, so a cluster with a thousand
// under-replicated topics is one line per listed topic.
func (p *HealthPage) Summary(cluster string) string {
	summary := fmt.Sprintf("cluster %s: %d topics checked, %d with problems", cluster, p.Checked, p.Problems)
	listed := &HealthReport{Topics: p.Topics}
	if _, issues, ok := strings.Cut(listed.Summary(), "\n"); ok {
		summary += "\n" + issues
	}
	if p.NextCursor != "" {
		summary += fmt.Sprintf("\n%d of %d topics listed (worst first); pass next_cursor as cursor for more.", len(p.Topics), p.Total)
	}
	return summary
}

// Summary is the page for a person: the round's summary, then one line per
// listed group that is not ok naming who consumes it (owners[i] is that
// line for Groups[i], worked out by the caller from the context graph),
// and the asked-for group's line even when it is ok, so a question about
// one group always names its consumer.
func (p *LagPage) Summary(owners []string, oneGroup bool) string {
	owner := func(i int) string {
		if i < len(owners) {
			return owners[i]
		}
		return ""
	}
	var b strings.Builder
	b.WriteString(p.Report.Summary())
	for i, g := range p.Groups {
		if g.Status == StatusOK {
			continue
		}
		fmt.Fprintf(&b, "\n  %s: %s", g.Group, owner(i))
	}
	if oneGroup && len(p.Groups) == 1 && p.Groups[0].Status == StatusOK {
		fmt.Fprintf(&b, "\n  %s: %s", p.Groups[0].Group, owner(0))
	}
	if p.NextCursor != "" {
		fmt.Fprintf(&b, "\n%d of %d groups listed; pass next_cursor as cursor for more.", len(p.Groups), p.Total)
	}
	return b.String()
}
