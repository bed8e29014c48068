// Package seeded generates incident scenarios by seeded code, for the
// end-to-end tests: a stream or pipeline in a new domain with 21–28 days of
// hourly history (weekday/weekend × hour of day seasonality, Poisson
// noise), its lineage from topic to outbound, one real change that causes
// the problem and decoy changes the same day that have no lineage path to
// it or the wrong timing. The same seed without the fault gives the healthy
// stretch a monitor must stay quiet over.
//
// Each scenario kind draws its names, volumes, history length, fault time
// and fault size from the seed, so the rules the tests exercise are not
// tuned to one dataset. Nothing here is read by the product: the agents
// must find each incident from the warehouse, the lineage and the change
// log by general means.
package seeded

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
)

// Kind names a scenario.
type Kind string

// The scenario kinds.
const (
	// ReplayDuplicates: logistics shipment events; a sink connector moved
	// to at-least-once delivery and replayed, writing event ids twice.
	ReplayDuplicates Kind = "replay_duplicates"
	// UnitChange: marketplace seller payouts; a deploy of the normalizing
	// job divides amounts by 100 (cents to units).
	UnitChange Kind = "unit_change"
	// LatePartition: IoT sensor readings loaded as hourly partitions; an
	// orchestrator schedule change leaves the day's partitions unloaded.
	LatePartition Kind = "late_partition"
)

// Kinds are the generated scenario kinds.
func Kinds() []Kind { return []Kind{ReplayDuplicates, UnitChange, LatePartition} }

// Scenario is one generated incident (or its healthy twin).
type Scenario struct {
	Kind    Kind
	Seed    uint64
	Healthy bool
	// Table is the symptomatic table; Asset its id (duckdb://schema.table).
	Table *Table
	Asset string
	// HistoryStart is where the hourly history begins (21–28 days before
	// Day); Day is the incident day's midnight; CheckAt when the team's
	// check runs that day (the agents' clock).
	HistoryStart time.Time
	Day          time.Time
	CheckAt      time.Time
	// FaultAt is when the causing change took effect.
	FaultAt time.Time
	// Lineage is what the team records once (record_lineage).
	Lineage lineage.Note
	// Changes are the change log of the incident day (record_change):
	// the cause and the decoys, in time order.
	Changes []changelog.RecordChangeParams
	// CauseKey is the key of the change that caused the problem.
	CauseKey string
	// Downstream are asset ids the blast radius must reach.
	Downstream []string
	// Symptom is the kind of symptom the fault shows as.
	Symptom incidents.SymptomKind
}

// Table is a warehouse table: its DDL and rows, each with the instant it
// landed, so the file can be written as it stood at any moment.
type Table struct {
	Schema, Name string
	// Columns is the DDL's column list, e.g. "(id VARCHAR NOT NULL, …)".
	Columns string
	Rows    []Row
}

// Ref is schema.name.
func (t *Table) Ref() string { return t.Schema + "." + t.Name }

// Row is one row's values in column order and when it landed.
type Row struct {
	Values []any
	Landed time.Time
}

// Generate builds a scenario of kind from seed. healthy leaves the fault
// out (and extends the data a week past the incident day, for a healthy
// week around it); everything else is the same draw.
func Generate(kind Kind, seed uint64, healthy bool) (*Scenario, error) {
	g := newGen(kind, seed, healthy)
	switch kind {
	case ReplayDuplicates:
		g.replay()
	case UnitChange:
		g.units()
	case LatePartition:
		g.partition()
	default:
		return nil, fmt.Errorf("unknown scenario kind %q; valid: %v", kind, Kinds())
	}
	return g.s, nil
}

// HealthyWeek are the seven days judged in a healthy run: three before
// the incident day, the day, three after.
func (s *Scenario) HealthyWeek() []time.Time {
	days := make([]time.Time, 7)
	for i := range days {
		days[i] = s.Day.AddDate(0, 0, i-3)
	}
	return days
}

// dataEnd is where generated data stops.
func (s *Scenario) dataEnd() time.Time {
	if s.Healthy {
		return s.Day.AddDate(0, 0, 4)
	}
	return s.CheckAt
}

type gen struct {
	r *rand.Rand
	s *Scenario
	// weekend is the weekend level as a share of a weekday's.
	weekend float64
	// peak is the hour of day with the most traffic.
	peak int
}

// anchor is a fixed Monday: scenarios are placed from it so a test is the
// same whatever day it runs.
var anchor = time.Date(2026, 9, 7, 0, 0, 0, 0, time.UTC)

func newGen(kind Kind, seed uint64, healthy bool) *gen {
	salt := map[Kind]uint64{ReplayDuplicates: 0x5e11, UnitChange: 0xca5e, LatePartition: 0x1a7e}[kind]
	r := rand.New(rand.NewPCG(seed, salt))
	// The incident day: a weekday some weeks after the anchor; the
	// history 21–28 days before it.
	day := anchor.AddDate(0, 0, 7*(4+r.IntN(6))+1+r.IntN(4)) // Tue..Fri
	s := &Scenario{Kind: kind, Seed: seed, Healthy: healthy, Day: day,
		HistoryStart: day.AddDate(0, 0, -(21 + r.IntN(8)))}
	return &gen{r: r, s: s, weekend: 0.45 + 0.35*r.Float64(), peak: 11 + r.IntN(6)}
}

// level is the expected count in the hour starting at at, for a base
// (the peak weekday hour's count).
func (g *gen) level(base float64, at time.Time) float64 {
	d := float64(at.Hour()-g.peak) / 24
	shape := 0.15 + 0.85*math.Pow(math.Cos(math.Pi*d), 2)
	if wd := at.Weekday(); wd == time.Saturday || wd == time.Sunday {
		shape *= g.weekend
	}
	return base * shape
}

// poisson draws a Poisson count: Knuth's method for small means, a rounded
// normal for large ones.
func (g *gen) poisson(mean float64) int {
	if mean > 60 {
		return int(math.Max(0, math.Round(mean+math.Sqrt(mean)*g.r.NormFloat64())))
	}
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= g.r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// pick returns one of options.
func pick[T any](r *rand.Rand, options ...T) T { return options[r.IntN(len(options))] }

// at is a time of the incident day.
func (g *gen) at(h, m int) time.Time {
	return g.s.Day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

// change adds a change of the incident day.
func (g *gen) change(key string, at time.Time, kind, system string, assets []string, actor, summary string, details map[string]string) {
	g.s.Changes = append(g.s.Changes, changelog.RecordChangeParams{Key: key, At: at, Kind: kind, System: system, Assets: assets,
		Actor: actor, Summary: summary, Details: details})
}

// sortChanges puts the change log in time order.
func (g *gen) sortChanges() {
	cs := g.s.Changes
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].At.Before(cs[j-1].At); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// keep adds a row when it had landed by the end of the data.
func (g *gen) keep(t *Table, landed time.Time, values ...any) {
	if landed.After(g.s.dataEnd()) {
		return
	}
	t.Rows = append(t.Rows, Row{Values: values, Landed: landed})
}

// id is a short random hex id.
func (g *gen) id(prefix string) string {
	return fmt.Sprintf("%s%012x", prefix, g.r.Uint64()&0xffffffffffff)
}
