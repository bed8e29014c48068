package tables

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dataworkers/dw/internal/demo"
)

// The loyalty story's generator. The Flink job points-balance keeps
// SUM(points) per member in state and writes every change to the
// compacted topic member-balances; the BigQuery sink merges it into
// loyalty.member_balances. At 14:00 the job is stopped with a savepoint
// for release v4.2; at 14:02 it restores with allowNonRestoredState and the
// aggregate's state is skipped, so every member who shops afterwards
// restarts from zero: the balance becomes the points of that one basket.
//
// Three kinds of history are generated:
//   - a daily simulation per member over the 21 days before the incident
//     (purchases, and the nightly expiry of old points at 00:05), which
//     gives the balances at 14:00 and the nightly tier evaluations;
//   - per-member purchases from 14:00 until the verification at 16:05;
//   - the team's hourly activity model, one row per hour, for
//     the metric "average balance of members active in the last hour".
//     Past hours come from the seasonal profile; the incident hours are
//     aggregated from the per-member purchases, so the metric and the
//     member table tell the same story.

const (
	loyaltySeed    uint64 = 0x10_7A17_0002
	loyaltyMembers        = 100_000
	loyaltyStores         = 24
	// expiryChance is the daily chance that some of a member's points
	// expire in the 00:05 batch; expiryMin/Max bound the share that goes.
	expiryChance = 0.0155
	expiryMin    = 0.9
	expiryMax    = 1.0
	// dailyShopChance and dailyPointsMedian drive the daily simulation.
	dailyShopChance   = 0.17
	dailyPointsMedian = 400.0
	// basketPointsMedian is the median points of a basket in the incident
	// window; minBasketPoints is the least a purchase earns (a pint of milk).
	basketPointsMedian = 450.0
	minBasketPoints    = 12
	// singleItemShare is the share of purchases of each single item in
	// singleItemPoints (a pint of milk, bread, coffee, a newspaper).
	singleItemShare = 0.01
)

var singleItemPoints = []int64{12, 18, 25, 40}

// tierThresholds are the minimum balances of silver, gold and platinum.
var tierNames = []string{"bronze", "silver", "gold", "platinum"}
var tierThresholds = []int64{0, 2000, 5000, 10000}

func tierOf(balance int64) int {
	t := 0
	for i, min := range tierThresholds {
		if balance >= min {
			t = i
		}
	}
	return t
}

// hourlyActiveShare is the share of members with a purchase in each hour
// of the day (UTC); the same every day of the week.
var hourlyActiveShare = [24]float64{
	0.010, 0.008, 0.006, 0.006, 0.008, 0.015, 0.050, 0.120, 0.220, 0.300, 0.380, 0.460,
	0.540, 0.575, 0.600, 0.575, 0.550, 0.520, 0.450, 0.330, 0.200, 0.100, 0.050, 0.020,
}

// avgBalanceProfile is the daily shape of the average balance of active
// members (1.0 at 14:00).
func avgBalanceProfile(hour int) float64 {
	return 1 + 0.1*math.Sin(2*math.Pi*float64(hour-14)/24)
}

type purchase struct {
	at     time.Time
	points int64
	store  int
}

type loyaltyMember struct {
	ID   string
	home int
	// balanceD1 and tierD1 are last night's evaluation (D-1 21:30);
	// tierD2 the one before, which fct_member_tier keeps as previous_tier.
	balanceD1      int64
	tierD1, tierD2 int
	// b14 is the correct balance at 14:00 on the incident day.
	b14 int64
	// lastPurchase and lastUpdate are before 14:00: a purchase, or the
	// 00:05 expiry batch, writes the row.
	lastPurchase, lastUpdate time.Time
	// window holds the purchases from 14:00 to the verification.
	window []purchase
	// latency and merge jitter for the member's writes, drawn once.
	catchupU, mergeU, latencyU float64
}

type tierDay struct {
	Day                            time.Time
	EvaluatedAt                    time.Time
	Members, Upgrades, Downgrades  int64
	Platinum, Gold, Silver, Bronze int64
}

type loyaltyModel struct {
	seed        uint64
	tl          demo.Instants
	storeWeight []float64
	members     []loyaltyMember
	tierHistory []tierDay
	// base is the level of the metric's daily profile, calibrated on the
	// members so that a day without the incident sits on the profile.
	base float64
}

func storeID(i int) string { return fmt.Sprintf("store-%02d", i+1) }

func newLoyaltyModel(seed uint64, tl demo.Instants) *loyaltyModel {
	m := &loyaltyModel{seed: seed, tl: tl}
	r := rand.New(rand.NewPCG(seed, 0))
	var sum float64
	for i := 0; i < loyaltyStores; i++ {
		w := math.Exp(0.35 * r.NormFloat64())
		m.storeWeight = append(m.storeWeight, w)
		sum += w
	}
	for i := range m.storeWeight {
		m.storeWeight[i] /= sum
	}
	days := make([]tierDay, demo.HistoryDays)
	for d := range days {
		back := d - demo.HistoryDays
		days[d] = tierDay{Day: tl.Day.AddDate(0, 0, back), EvaluatedAt: tl.NightlyTiers.AddDate(0, 0, back), Members: loyaltyMembers}
	}
	m.members = make([]loyaltyMember, loyaltyMembers)
	for i := range m.members {
		m.simulateMember(i, &m.members[i], days)
	}
	m.tierHistory = days
	// Calibrate the seasonal profile on the members: a day without the
	// incident reads, at 14:00 and 15:00, what the correct balances give.
	h14, h15 := tl.Day.Add(14*time.Hour), tl.Day.Add(15*time.Hour)
	m.base = (average(m.activityFromPurchases(h14, jobV41Restored, h14))/avgBalanceProfile(14) +
		average(m.activityFromPurchases(h15, jobV41Restored, h15))/avgBalanceProfile(15)) / 2
	return m
}

// average is the metric over activity rows: total balance over members.
func average(rows []activityRow) float64 {
	var n, sum int64
	for _, r := range rows {
		n += r.ActiveMembers
		sum += r.BalanceSum
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

func (m *loyaltyModel) pickStore(u float64) int {
	for i, w := range m.storeWeight {
		if u < w {
			return i
		}
		u -= w
	}
	return len(m.storeWeight) - 1
}

// simulateMember runs one member's daily simulation and draws their
// purchases in the incident window. Each member has its own PCG stream.
func (m *loyaltyModel) simulateMember(i int, mem *loyaltyMember, days []tierDay) {
	r := rand.New(rand.NewPCG(m.seed, uint64(i+1)))
	tl := m.tl
	mem.ID = fmt.Sprintf("M%07d", i+1)
	mem.home = m.pickStore(r.Float64())
	// Start near the steady state: the balance is what the member earned
	// since their last expiry, which lies an exponential time back.
	sinceExpiry := math.Min(r.ExpFloat64()/expiryChance, 400)
	bal := int64(math.Round(sinceExpiry * dailyShopChance * dailyPointsMedian * math.Exp(0.245+0.35*r.NormFloat64())))
	mem.lastPurchase = tl.HistoryStart.AddDate(0, 0, -1-r.IntN(40)).Add(time.Duration(8*3600+r.IntN(12*3600)) * time.Second)
	mem.lastUpdate = mem.lastPurchase
	prevTier := tierOf(bal)
	mem.tierD2, mem.tierD1 = prevTier, prevTier
	for d := 0; d <= demo.HistoryDays; d++ {
		day := tl.HistoryStart.AddDate(0, 0, d)
		expiryU, expiryShare := r.Float64(), r.Float64()
		shopU, shopTime, ptsN := r.Float64(), r.Float64(), r.NormFloat64()
		if expiryU < expiryChance && bal > 0 {
			bal -= int64(math.Round(float64(bal) * (expiryMin + (expiryMax-expiryMin)*expiryShare)))
			mem.lastUpdate = day.Add(5 * time.Minute)
		}
		today := d == demo.HistoryDays
		chance := dailyShopChance
		if today {
			chance *= 0.5 // the morning: purchases before 14:00
		}
		if shopU < chance {
			bal += int64(math.Max(minBasketPoints, math.Round(dailyPointsMedian*math.Exp(0.7*ptsN))))
			at := day.Add(8*time.Hour + time.Duration(shopTime*float64(13*time.Hour)))
			if today {
				at = day.Add(7*time.Hour + time.Duration(shopTime*float64(7*time.Hour)))
			}
			mem.lastPurchase = at.Truncate(time.Second)
			if at.After(mem.lastUpdate) {
				mem.lastUpdate = mem.lastPurchase
			}
		}
		if today {
			break
		}
		tier := tierOf(bal)
		switch {
		case tier < prevTier:
			days[d].Downgrades++
		case tier > prevTier:
			days[d].Upgrades++
		}
		switch tier {
		case 0:
			days[d].Bronze++
		case 1:
			days[d].Silver++
		case 2:
			days[d].Gold++
		case 3:
			days[d].Platinum++
		}
		mem.tierD2, mem.tierD1 = prevTier, tier
		mem.balanceD1 = bal
		prevTier = tier
	}
	mem.b14 = bal
	mem.catchupU, mem.mergeU, mem.latencyU = r.Float64(), r.Float64(), r.Float64()
	for h := tl.Day.Add(14 * time.Hour); h.Before(tl.Verify); h = h.Add(time.Hour) {
		activeU, atU, ptsN, otherStoreU, otherStore, itemU := r.Float64(), r.Float64(), r.NormFloat64(), r.Float64(), r.Float64(), r.Float64()
		if activeU >= hourlyActiveShare[h.Hour()] {
			continue
		}
		points := int64(math.Max(minBasketPoints, math.Round(basketPointsMedian*math.Exp(0.75*ptsN))))
		if k := int(itemU / singleItemShare); k < len(singleItemPoints) {
			points = singleItemPoints[k]
		}
		store := mem.home
		if otherStoreU < 0.1 {
			store = m.pickStore(otherStore)
		}
		mem.window = append(mem.window, purchase{
			at:     h.Add(time.Duration(atU * float64(time.Hour))).Truncate(time.Millisecond),
			points: points,
			store:  store,
		})
	}
}

// jobMode is which points-balance deployment wrote the window purchases.
type jobMode int

const (
	// jobV42Skipped is v4.2 restored at 14:02 without the aggregate's
	// state: balances restart from zero; it writes last_store_id.
	jobV42Skipped jobMode = iota
	// jobV41Restored is v4.1 redeployed from the 14:00 savepoint at the
	// fix with its state: balances are correct; v4.1 has no last_store_id.
	jobV41Restored
)

// processedAt is when the job wrote the balance for a purchase: a
// restarted job works through the backlog since the savepoint right after
// its start, then keeps up within seconds.
func (m *loyaltyModel) processedAt(mem *loyaltyMember, p purchase, mode jobMode) time.Time {
	start, catchup := m.tl.Restore, 40*time.Second
	if mode == jobV41Restored {
		start, catchup = m.tl.Fix, 90*time.Second
	}
	at := p.at
	if at.Before(start) {
		at = start.Add(time.Duration(mem.catchupU * float64(catchup)))
	}
	return at.Add(time.Second + time.Duration(mem.latencyU*float64(2*time.Second))).Truncate(time.Millisecond)
}

// mergeLag is how long the BigQuery sink takes to merge a write.
func (mem *loyaltyMember) mergeLag() time.Duration {
	return 10*time.Second + time.Duration(mem.mergeU*float64(65*time.Second))
}

type balanceRow struct {
	MemberID       string
	Balance        int64
	LastStoreID    string // "" is NULL
	LastActivityAt time.Time
	UpdatedAt      time.Time
	IngestedAt     time.Time
}

// balances is loyalty.member_balances as merged by asOf.
func (m *loyaltyModel) balances(asOf time.Time, mode jobMode) []balanceRow {
	out := make([]balanceRow, len(m.members))
	for i := range m.members {
		mem := &m.members[i]
		row := balanceRow{
			MemberID:       mem.ID,
			Balance:        mem.b14,
			LastActivityAt: mem.lastPurchase,
			UpdatedAt:      mem.lastUpdate.Add(time.Second),
		}
		row.IngestedAt = row.UpdatedAt.Add(mem.mergeLag())
		var sum int64
		for _, p := range mem.window {
			done := m.processedAt(mem, p, mode)
			merged := done.Add(mem.mergeLag())
			if merged.After(asOf) {
				break
			}
			sum += p.points
			row.LastActivityAt, row.UpdatedAt, row.IngestedAt = p.at, done, merged
			switch mode {
			case jobV42Skipped:
				row.Balance, row.LastStoreID = sum, storeID(p.store)
			case jobV41Restored:
				row.Balance, row.LastStoreID = mem.b14+sum, ""
			}
		}
		out[i] = row
	}
	return out
}

type activityRow struct {
	HourStart     time.Time
	ActiveMembers int64
	BalanceSum    int64
	ComputedAt    time.Time
}

// activityComputeDelay is when the hourly model runs after an hour ends.
const activityComputeDelay = 4 * time.Minute

// activityHistory is the hourly model's rows for hours in [from, to) from
// the seasonal profile.
func (m *loyaltyModel) activityHistory(from, to time.Time) []activityRow {
	var out []activityRow
	for h := from; h.Before(to); h = h.Add(time.Hour) {
		hourIndex := int64(h.Sub(m.tl.Day) / time.Hour)
		r := rand.New(rand.NewPCG(m.seed^0xAC71_0173, uint64(hourIndex+1<<32)))
		activeN, avgN, delayU := r.NormFloat64(), r.NormFloat64(), r.Float64()
		active := math.Round(loyaltyMembers * hourlyActiveShare[h.Hour()] * math.Exp(0.02*activeN))
		avg := m.base * avgBalanceProfile(h.Hour()) * math.Exp(0.015*avgN)
		out = append(out, activityRow{
			HourStart:     h,
			ActiveMembers: int64(active),
			BalanceSum:    int64(math.Round(active * avg)),
			ComputedAt:    h.Add(time.Hour + activityComputeDelay + time.Duration(delayU*40)*time.Second),
		})
	}
	return out
}

// activityFromPurchases aggregates the window purchases of the hour h as
// the job in mode reported them: each active member once, with the
// balance after their purchase.
func (m *loyaltyModel) activityFromPurchases(h time.Time, mode jobMode, computedAt time.Time) []activityRow {
	row := activityRow{HourStart: h, ComputedAt: computedAt}
	end := h.Add(time.Hour)
	for i := range m.members {
		mem := &m.members[i]
		var sum int64
		for _, p := range mem.window {
			sum += p.points
			if p.at.Before(h) {
				continue
			}
			if !p.at.Before(end) {
				break
			}
			bal := sum
			if mode == jobV41Restored {
				bal += mem.b14
			}
			row.ActiveMembers++
			row.BalanceSum += bal
		}
	}
	if row.ActiveMembers == 0 {
		return nil
	}
	return []activityRow{row}
}

type tierRow struct {
	MemberID     string
	Tier         string
	PreviousTier string
	Balance      int64
	EvaluatedAt  time.Time
}

// tiers is fct_member_tier as last night's nightly_tiers built it.
func (m *loyaltyModel) tiers() []tierRow {
	out := make([]tierRow, len(m.members))
	at := m.tl.NightlyTiers.Add(-24 * time.Hour)
	for i := range m.members {
		mem := &m.members[i]
		out[i] = tierRow{MemberID: mem.ID, Tier: tierNames[mem.tierD1], PreviousTier: tierNames[mem.tierD2], Balance: mem.balanceD1, EvaluatedAt: at}
	}
	return out
}
