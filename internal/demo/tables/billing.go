package tables

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dataworkers/dw/internal/demo"
)

// The billing story's generator: per-account hourly usage as the Flink
// statement usage-hourly-rollup emits it and Tableflow lands it.
//
// The statement is an updating aggregate keyed by usage_id (account and
// hour), so the hour still in progress is already in the table with the
// requests counted so far; its latest version is what a reader sees.
// egress_bytes is emitted only when every request of the hour reported
// response_bytes (the statement's CASE guard), so once an account's gateway
// pod produces schema version 12, which no longer carries response_bytes,
// that account's hour turns null. Pods take the new version one by one
// from 14:10 (the rolling deploy), which is why the null share climbs hour
// by hour.
//
// ingested_at is the Kafka timestamp of the row's latest version as
// Tableflow lands it. Flink stamps its output with the event-time
// watermark at emission, so it trails window_end by the pipeline's lag (1
// to 4.5 minutes for a closed hour), and a replay from earlier offsets
// reproduces it: the corrected statement's rows keep the same lag.

const (
	billingSeed     uint64 = 0xB111_0001
	billingAccounts        = 400
	// kibRoundingBytes is the average rounding added by response_kib*1024
	// (the gateway reports whole KiB, rounded up).
	kibRoundingBytes = 512
)

type region struct {
	name string
	// utcOffset in hours; business hours are local 07:00-20:00.
	utcOffset int
	weight    float64
}

var billingRegions = []region{
	{"us-east-1", -5, 0.45},
	{"eu-west-1", 1, 0.45},
	{"ap-southeast-2", 10, 0.10},
}

type billingAccount struct {
	ID, Name, Region, Plan, Currency string
	utcOffset                        int
	peakRequests                     float64 // requests in a peak business hour
	bytesPerRequest                  float64
	pod                              int
	CreatedAt                        time.Time
}

type usageRow struct {
	UsageID      string
	AccountID    string
	Region       string
	WindowStart  time.Time
	WindowEnd    time.Time
	RequestCount int64
	EgressBytes  int64
	EgressNull   bool
	IngestedAt   time.Time
}

// usageMode is which statement produced the rows.
type usageMode int

const (
	// rollupV1 is usage-hourly-rollup as created against schema version 11.
	rollupV1 usageMode = iota
	// rollupV2 is the corrected statement writing usage-hourly-v2:
	// SUM(COALESCE(response_kib * 1024, response_bytes)), never null.
	rollupV2
)

type billingModel struct {
	seed     uint64
	tl       demo.Instants
	accounts []billingAccount
}

var (
	accountAdjectives = []string{"Northwind", "Blue", "Granite", "Silver", "Harbor", "Maple", "Quantum", "Cedar",
		"Atlas", "Copper", "Lumen", "Vector", "Summit", "Coral", "Ember", "Polar", "Orbit", "Willow", "Nimbus", "Falcon"}
	accountNouns = []string{"Analytics", "Logistics", "Health", "Robotics", "Media", "Payments", "Foods", "Labs",
		"Travel", "Energy", "Studios", "Insurance", "Games", "Retail", "Maps", "Security", "Learning", "Motors",
		"Bank", "Cloud"}
)

func newBillingModel(seed uint64, tl demo.Instants) *billingModel {
	m := &billingModel{seed: seed, tl: tl}
	r := rand.New(rand.NewPCG(seed, 0))
	for i := 0; i < billingAccounts; i++ {
		reg := pickRegion(r.Float64())
		peak := clamp(900*math.Exp(1.0*r.NormFloat64()), 40, 60000)
		bpr := clamp(20*1024*math.Exp(0.6*r.NormFloat64()), 800, 400*1024)
		plan := "starter"
		switch {
		case peak >= 6000:
			plan = "enterprise"
		case peak >= 1500:
			plan = "business"
		case peak >= 150:
			plan = "team"
		}
		currency := "USD"
		switch reg.name {
		case "eu-west-1":
			currency = "EUR"
		case "ap-southeast-2":
			currency = "AUD"
		}
		m.accounts = append(m.accounts, billingAccount{
			ID:              fmt.Sprintf("acct_%04d", i+1),
			Name:            accountAdjectives[i%len(accountAdjectives)] + " " + accountNouns[i/len(accountAdjectives)],
			Region:          reg.name,
			Plan:            plan,
			Currency:        currency,
			utcOffset:       reg.utcOffset,
			peakRequests:    peak,
			bytesPerRequest: bpr,
			pod:             r.IntN(demo.GatewayPods),
			CreatedAt:       tl.HistoryStart.Add(-time.Duration(30+r.IntN(900)) * 24 * time.Hour).Truncate(time.Hour),
		})
	}
	return m
}

func pickRegion(u float64) region {
	for _, r := range billingRegions {
		if u < r.weight {
			return r
		}
		u -= r.weight
	}
	return billingRegions[len(billingRegions)-1]
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

// podUpgrade is when a gateway pod starts producing schema version 12.
func (m *billingModel) podUpgrade(pod int) time.Time {
	return m.tl.GatewayDeploy.Add(time.Duration(pod) * demo.GatewayPodStep)
}

// weekFactor scales request volume by the account's local weekday.
func weekFactor(d time.Weekday) float64 {
	switch d {
	case time.Saturday:
		return 0.55
	case time.Sunday:
		return 0.45
	case time.Monday:
		return 0.95
	case time.Friday:
		return 0.9
	}
	return 1
}

// rows generates the rows visible at asOf for hours starting in
// [from, asOf). Each account-hour draws from its own PCG stream, so a row
// does not depend on which other rows are generated or on asOf beyond
// how much of its hour had landed.
func (m *billingModel) rows(from, asOf time.Time, mode usageMode) []usageRow {
	var out []usageRow
	first := from.Truncate(time.Hour)
	for ai := range m.accounts {
		a := &m.accounts[ai]
		up := m.podUpgrade(a.pod)
		for h := first; h.Before(asOf); h = h.Add(time.Hour) {
			if row, ok := m.row(ai, a, h, asOf, up, mode); ok {
				out = append(out, row)
			}
		}
	}
	return out
}

func (m *billingModel) row(ai int, a *billingAccount, h, asOf, up time.Time, mode usageMode) (usageRow, bool) {
	hourIndex := int64(h.Sub(m.tl.Day) / time.Hour)
	r := rand.New(rand.NewPCG(m.seed^(uint64(ai+1)*0x9E3779B97F4A7C15), uint64(hourIndex+1<<32)))
	presentU, firstEventU := r.Float64(), r.Float64()
	countN, bytesN := r.NormFloat64(), r.NormFloat64()
	lagU, commitU := r.Float64(), r.Float64()

	local := h.Add(time.Duration(a.utcOffset) * time.Hour)
	lh := local.Hour()
	daytime := lh >= 7 && lh < 20
	p, shape := 0.06, 0.05
	if daytime {
		p = 0.985
		shape = 0.45 + 0.55*math.Sin(math.Pi*(float64(lh-7)+0.5)/13)
	}
	if presentU >= p {
		return usageRow{}, false
	}
	mean := a.peakRequests * shape * weekFactor(local.Weekday())
	count := math.Max(1, math.Round(mean*math.Exp(0.12*countN)))
	bytes := count * a.bytesPerRequest * math.Exp(0.06*bytesN)

	end := h.Add(time.Hour)
	ingested := end.Add(60*time.Second + time.Duration(lagU*210)*time.Second)
	covered := end
	if ingested.After(asOf) {
		// The hour is still open: the visible version is the last commit
		// before asOf and covers the requests up to then.
		ingested = asOf.Add(-(30*time.Second + time.Duration(commitU*150)*time.Second))
		covered = ingested
		if covered.After(end) {
			covered = end
		}
		frac := float64(covered.Sub(h)) / float64(time.Hour)
		// Daytime accounts call every minute; a quiet account has its
		// first request at a random point of the hour.
		if frac <= 0 || (!daytime && firstEventU >= frac) {
			return usageRow{}, false
		}
		count = math.Max(1, math.Round(count*frac))
		bytes *= frac
	}
	row := usageRow{
		UsageID:      a.ID + "-" + h.Format("2006010215"),
		AccountID:    a.ID,
		Region:       a.Region,
		WindowStart:  h,
		WindowEnd:    end,
		RequestCount: int64(count),
		EgressBytes:  int64(math.Round(bytes)),
		IngestedAt:   ingested,
	}
	if up.Before(covered) {
		switch mode {
		case rollupV1:
			row.EgressBytes, row.EgressNull = 0, true
		case rollupV2:
			start := h
			if up.After(start) {
				start = up
			}
			postFrac := float64(covered.Sub(start)) / float64(covered.Sub(h))
			postCount := math.Round(count * postFrac)
			row.EgressBytes = int64(math.Round(bytes*(1-postFrac)) + math.Round(bytes*postFrac+postCount*kibRoundingBytes))
		}
	}
	return row, true
}

// billableDay is one row of billing.fct_billable_egress.
type billableDay struct {
	AccountID     string
	Day           time.Time
	Plan          string
	Currency      string
	RequestCount  int64
	BillableBytes int64
}

// billable aggregates rows the way fct_billable_egress does:
// COALESCE(egress_bytes, 0) summed per account and day.
func (m *billingModel) billable(rows []usageRow) []billableDay {
	plan := map[string]*billingAccount{}
	for i := range m.accounts {
		plan[m.accounts[i].ID] = &m.accounts[i]
	}
	type key struct {
		acct string
		day  time.Time
	}
	idx := map[key]int{}
	var out []billableDay
	for _, r := range rows {
		k := key{r.AccountID, r.WindowStart.Truncate(24 * time.Hour)}
		i, ok := idx[k]
		if !ok {
			a := plan[r.AccountID]
			i = len(out)
			idx[k] = i
			out = append(out, billableDay{AccountID: r.AccountID, Day: k.day, Plan: a.Plan, Currency: a.Currency})
		}
		out[i].RequestCount += r.RequestCount
		if !r.EgressNull {
			out[i].BillableBytes += r.EgressBytes
		}
	}
	return out
}
