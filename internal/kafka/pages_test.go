package kafka

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func firstPage(t *testing.T, limit int) page.Page {
	t.Helper()
	pg, err := page.Params{Limit: limit}.Resolve("test")
	if err != nil {
		t.Fatal(err)
	}
	return pg
}

// TestLagReportPage: groups by name, counts over all of them, and a
// group's partitions cut to its most lagging with the whole kept.
func TestLagReportPage(t *testing.T) {
	parts := func(lags ...int64) []PartitionReport {
		var out []PartitionReport
		for i, l := range lags {
			out = append(out, PartitionReport{PartitionLag: PartitionLag{Topic: "t", Partition: int32(i), Lag: l, ClientID: fmt.Sprintf("c-%d", i)}})
		}
		return out
	}
	rep := &LagReport{Cluster: "prod", Groups: []GroupReport{
		{Group: "zeta", Status: StatusOK, Partitions: parts(1)},
		{Group: "alpha", Status: StatusLagging, Partitions: parts(5, 9, 1, 9, 7)},
		{Group: "mid", Status: StatusStalled, Partitions: parts(2, 3)},
	}}
	lp := rep.Page(firstPage(t, 2), 3)
	if lp.Report != rep || lp.Total != 3 || lp.NextCursor == "" || len(lp.Groups) != 2 {
		t.Fatalf("page: %+v", lp)
	}
	if lp.StatusCounts[string(StatusOK)] != 1 || lp.StatusCounts[string(StatusLagging)] != 1 || lp.StatusCounts[string(StatusStalled)] != 1 {
		t.Errorf("counts over every group: %v", lp.StatusCounts)
	}
	a, m := lp.Groups[0], lp.Groups[1]
	if a.Group != "alpha" || m.Group != "mid" {
		t.Fatalf("order: %s, %s", a.Group, m.Group)
	}
	var got []int32
	for _, p := range a.Partitions {
		got = append(got, p.Partition)
	}
	// Most lagging first, ties in reported order.
	if !slices.Equal(got, []int32{1, 3, 4}) || a.PartitionsTotal != 5 || len(a.Whole.Partitions) != 5 {
		t.Errorf("alpha partitions %v of %d (whole %d)", got, a.PartitionsTotal, len(a.Whole.Partitions))
	}
	// Under the cut, a group keeps its own order.
	if m.PartitionsTotal != 2 || m.Partitions[0].Partition != 0 || m.Partitions[1].Partition != 1 {
		t.Errorf("mid: %+v", m)
	}
	// The report itself is not reordered.
	if rep.Groups[0].Group != "zeta" || rep.Groups[1].Partitions[0].Lag != 5 {
		t.Error("Page changed the report")
	}
}

// TestConsumerLagPage reads a round through the monitor and pages it.
func TestConsumerLagPage(t *testing.T) {
	db := storetest.SQLite(t)
	clk := clock.NewFake(time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC))
	m := &Monitor{Source: &fixedSource{groups: 5, parts: 12}, DB: db, Clock: clk, Cluster: "prod"}
	lp, err := m.ConsumerLagPage(context.Background(), LagFilter{}, firstPage(t, 3), 4)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range lp.StatusCounts {
		n += c
	}
	if lp.Total != 5 || n != 5 || len(lp.Groups) != 3 || lp.Groups[0].Group != "group-000" {
		t.Fatalf("page: total %d counts %v groups %d", lp.Total, lp.StatusCounts, len(lp.Groups))
	}
	for _, g := range lp.Groups {
		if len(g.Partitions) != 4 || g.PartitionsTotal != 12 || g.Partitions[0].Lag < g.Partitions[3].Lag {
			t.Errorf("%s: %d of %d partitions", g.Group, len(g.Partitions), g.PartitionsTotal)
		}
	}
}

// TestHealthReportPage: critical, then warning or unreadable, then ok;
// counts and problems over every topic, the summary over this page's.
func TestHealthReportPage(t *testing.T) {
	rep := &HealthReport{Topics: []TopicHealth{
		{Topic: "a-ok", Health: HealthOK},
		{Topic: "b-unreadable", Health: HealthOK, Error: "configs not read"},
		{Topic: "c-critical", Health: HealthCritical, Issues: []Issue{{Kind: "offline", Detail: "partition 0 has no leader"}}},
		{Topic: "d-warning", Health: HealthWarning, Issues: []Issue{{Kind: "under_replicated", Detail: "partition 1 has 2 of 3 replicas in sync"}}},
		{Topic: "e-ok", Health: HealthOK},
	}}
	hp := rep.Page(firstPage(t, 2))
	var names []string
	for _, tp := range hp.Topics {
		names = append(names, tp.Topic)
	}
	if !slices.Equal(names, []string{"c-critical", "b-unreadable"}) || hp.Total != 5 || hp.NextCursor == "" {
		t.Fatalf("page: %v total %d", names, hp.Total)
	}
	if hp.Checked != 5 || hp.Problems != 3 || hp.HealthCounts[HealthOK] != 3 || hp.HealthCounts[HealthCritical] != 1 {
		t.Errorf("counts: %+v", hp)
	}
	want := "cluster prod: 5 topics checked, 3 with problems\n" +
		"- c-critical (critical): partition 0 has no leader\n" +
		"- b-unreadable: configs not read\n" +
		"2 of 5 topics listed (worst first); pass next_cursor as cursor for more."
	if got := hp.Summary("prod"); got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
}

// TestLagPageSummary: the round's summary, then an owner line for each
// listed group that is not ok (never for one on another page), the asked
// group's line even when ok, and the paging hint only when more remain.
func TestLagPageSummary(t *testing.T) {
	rep := &LagReport{Cluster: "prod", Window: "10m0s", Groups: []GroupReport{
		{Group: "zeta", Status: StatusStopped},
		{Group: "alpha", Status: StatusLagging, TotalLag: 40},
		{Group: "beta", Status: StatusOK},
	}}
	head := strings.Split(rep.Summary(), "\n")
	lines := func(s string) []string { return strings.Split(s, "\n")[len(head):] }

	lp := rep.Page(firstPage(t, 2), 10)
	got := lines(lp.Summary([]string{"owner of alpha", "owner of beta"}, false))
	want := []string{"  alpha: owner of alpha", "2 of 3 groups listed; pass next_cursor as cursor for more."}
	if !slices.Equal(got, want) {
		t.Errorf("first page:\n got %q\nwant %q", got, want)
	}
	if whole := strings.Split(lp.Summary(nil, false), "\n"); !slices.Equal(whole[:len(head)], head) {
		t.Errorf("the round's summary leads: %q", whole)
	}

	one := (&LagReport{Cluster: "prod", Window: "10m0s", Groups: []GroupReport{{Group: "beta", Status: StatusOK}}}).Page(firstPage(t, 5), 10)
	oneHead := len(strings.Split(one.Report.Summary(), "\n"))
	if got := strings.Split(one.Summary([]string{"consumed by job://beta"}, true), "\n")[oneHead:]; !slices.Equal(got, []string{"  beta: consumed by job://beta"}) {
		t.Errorf("asked-for ok group: %q", got)
	}
	if got := strings.Split(one.Summary([]string{"consumed by job://beta"}, false), "\n")[oneHead:]; len(got) != 0 {
		t.Errorf("an ok group in a full round gets no line: %q", got)
	}
}
