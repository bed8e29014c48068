package packload

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/demo"
	"github.com/dataworkers/dw/internal/lineage"
)

// TestEmbeddedDefaultHasThePacksPeople: the embedded default's people and
// domains are the scenario packs' (config/demo_people.yaml), the local OS
// user stands in for every person, and every asset of every pack falls in
// the same domain, with the same owner, as in its own pack.
func TestEmbeddedDefaultHasThePacksPeople(t *testing.T) {
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	login := config.CurrentOSUser()
	now := time.Date(2026, 3, 10, 16, 0, 0, 0, time.UTC)
	for _, name := range demo.Packs() {
		p, _, err := Read(name, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range p.People {
			got, ok := cfg.Person(want.ID)
			if !ok {
				t.Errorf("%s: person %s missing from the embedded default", name, want.ID)
				continue
			}
			if got.Name != want.Name || got.Email != want.Email || got.SlackID != want.SlackID {
				t.Errorf("%s: person %s differs: %+v vs %+v", name, want.ID, got, want)
			}
			for _, u := range want.OSUsers {
				if !slices.Contains(got.OSUsers, u) {
					t.Errorf("%s: %s lost os user %s", name, want.ID, u)
				}
			}
			if login != "" && !slices.Contains(got.OSUsers, login) {
				t.Errorf("%s: the local user %s does not stand in for %s", name, login, want.ID)
			}
		}
		packCfg := &config.Config{People: p.People, Domains: p.Domains}
		for _, a := range p.Notes.Assets {
			want, ok, err := approvals.DomainOf(context.Background(), packCfg, lineage.StoreIdentities(nil, packCfg), a.ID)
			if err != nil || !ok {
				continue
			}
			got, ok, err := approvals.DomainOf(context.Background(), cfg, lineage.StoreIdentities(nil, cfg), a.ID)
			if err != nil || !ok || got.Name != want.Name || !slices.Equal(got.Owners, want.Owners) || got.Autonomy != want.Autonomy || got.ApprovalExpiry != want.ApprovalExpiry {
				t.Errorf("%s: asset %s is in %+v on the embedded default, in %+v in its pack", name, a.ID, got, want)
			}
		}
	}
	// A configured dw.yaml has none of them.
	conf, err := config.Parse("dw.yaml", []byte("home: "+t.TempDir()+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(conf.People) != 0 || len(conf.Domains) != 0 {
		t.Errorf("a dw.yaml got the demo people: %v", conf.People)
	}
}

// TestDemoClockIsTheIncidentTime: the embedded default's clock reads the
// packs' 15:05 check on their incident day, whatever the wall clock, and
// every process of one data directory reads the same day.
func TestDemoClockIsTheIncidentTime(t *testing.T) {
	for _, real := range []time.Time{
		time.Date(2026, 3, 10, 3, 0, 0, 0, time.UTC), time.Date(2026, 3, 10, 15, 4, 59, 0, time.UTC),
		time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC), time.Date(2026, 3, 10, 23, 59, 0, 0, time.UTC),
	} {
		tl := demo.Timeline(real)
		if got := config.DemoIncidentDay(real); !got.Equal(tl.Day) {
			t.Errorf("at %s the demo day is %s, the packs' %s", real, got, tl.Day)
		}
		if got := config.DemoIncidentDay(real).Add(config.DemoIncidentTime); !got.Equal(tl.QualityCheck) {
			t.Errorf("at %s the demo time is %s, the packs' check %s", real, got, tl.QualityCheck)
		}
	}
	home := t.TempDir()
	t.Setenv("DW_HOME", home)
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	a, ok, err := cfg.DemoClock()
	if err != nil || !ok {
		t.Fatalf("no demo clock on the embedded default: %v", err)
	}
	time.Sleep(20 * time.Millisecond)
	b, _, err := cfg.DemoClock() // another process, later: the same anchor
	if err != nil || !a.At.Equal(b.At) || !a.Since.Equal(b.Since) {
		t.Fatalf("two reads of the anchor differ: %+v %+v (%v)", a, b, err)
	}
	tl := demo.Timeline(time.Now())
	if n := a.Now(); n.Before(tl.QualityCheck) || n.After(tl.QualityCheck.Add(time.Minute)) {
		t.Errorf("demo now %s, want just after %s", n, tl.QualityCheck)
	}
	// Seeding with the demo clock puts the packs on the demo's day.
	p, ptl, err := Read("billing", a.Now())
	if err != nil || !ptl.QualityCheck.Equal(a.At) || p == nil {
		t.Errorf("a pack read at demo time is placed on %s, the clock reads %s (%v)", ptl.QualityCheck, a.At, err)
	}
}
