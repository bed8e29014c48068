package tables

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/demo"
)

func hashLoyalty(m *loyaltyModel, asOf time.Time, mode jobMode) string {
	h := sha256.New()
	for _, r := range m.balances(asOf, mode) {
		fmt.Fprintf(h, "%s|%d|%s|%d|%d|%d\n", r.MemberID, r.Balance, r.LastStoreID, r.LastActivityAt.UnixMilli(),
			r.UpdatedAt.UnixMilli(), r.IngestedAt.UnixMilli())
	}
	for _, r := range m.activityHistory(m.tl.HistoryStart, m.tl.Day) {
		fmt.Fprintf(h, "%d|%d|%d\n", r.HourStart.Unix(), r.ActiveMembers, r.BalanceSum)
	}
	for _, d := range m.tierHistory {
		fmt.Fprintf(h, "%d|%d|%d\n", d.Day.Unix(), d.Upgrades, d.Downgrades)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func TestLoyaltyModelIsDeterministic(t *testing.T) {
	tl := demo.Timeline(storyNow)
	a := hashLoyalty(newLoyaltyModel(loyaltySeed, tl), tl.QualityCheck, jobV42Skipped)
	if b := hashLoyalty(newLoyaltyModel(loyaltySeed, tl), tl.QualityCheck, jobV42Skipped); a != b {
		t.Fatal("same seed, same timeline: different members")
	}
	if c := hashLoyalty(newLoyaltyModel(loyaltySeed+1, tl), tl.QualityCheck, jobV42Skipped); a == c {
		t.Fatal("a different seed gave the same members: the seed is not used")
	}
}

// TestSkippedStateRestartsBalances checks the story's arithmetic member by
// member: after the restore a balance is only the points since 14:00 (a
// 6,400-point member who buys milk shows 12); the redeploy with state
// gives the old balance plus those points.
func TestSkippedStateRestartsBalances(t *testing.T) {
	tl := demo.Timeline(storyNow)
	m := newLoyaltyModel(loyaltySeed, tl)
	broken := m.balances(tl.QualityCheck, jobV42Skipped)
	fixed := m.balances(tl.Verify, jobV41Restored)
	var reset, milk int
	for i := range m.members {
		mem := &m.members[i]
		var sinceRestore, sinceFix int64
		for _, p := range mem.window {
			if !m.processedAt(mem, p, jobV42Skipped).Add(mem.mergeLag()).After(tl.QualityCheck) {
				sinceRestore += p.points
			}
			if !m.processedAt(mem, p, jobV41Restored).Add(mem.mergeLag()).After(tl.Verify) {
				sinceFix += p.points
			}
		}
		if sinceRestore > 0 {
			reset++
			if broken[i].Balance != sinceRestore || broken[i].LastStoreID == "" {
				t.Fatalf("%s: balance %d after the restore, want the %d points since 14:00 (store %q)",
					mem.ID, broken[i].Balance, sinceRestore, broken[i].LastStoreID)
			}
			if sinceRestore == minBasketPoints && mem.b14 > 1000 {
				milk++
			}
		} else if broken[i].Balance != mem.b14 || broken[i].LastStoreID != "" {
			t.Fatalf("%s: untouched member shows %d (store %q), want %d", mem.ID, broken[i].Balance, broken[i].LastStoreID, mem.b14)
		}
		if fixed[i].Balance != mem.b14+sinceFix || fixed[i].LastStoreID != "" {
			t.Fatalf("%s: balance %d after the fix, want %d", mem.ID, fixed[i].Balance, mem.b14+sinceFix)
		}
	}
	if milk == 0 {
		t.Error("no member with a big balance shows just one 12-point basket")
	}
	t.Logf("%d members reset, %d of them show a lone 12-point basket", reset, milk)
}
