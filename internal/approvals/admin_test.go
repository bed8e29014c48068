package approvals

import (
	"context"
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Issue 12, trust on first use: a domain's approvers get on record only
// with an agent's proposal or by an act of the store admin (the account
// owning the SQLite file, or whose process first sealed the org receipt);
// a caller's config never puts anyone on record.

// adminBy is the store admin at the terminal: the account running the
// tests, which owns the test stores' files and seals their org receipts.
func adminBy(t testing.TB) Decider {
	t.Helper()
	login, err := OSLogin()
	if err != nil {
		t.Skipf("the test account has no login: %v", err)
	}
	return Decider{Channel: ChannelTerminal, OSUser: login, Evidence: map[string]string{"os_user": login, "uid": strconv.Itoa(os.Getuid())}}
}

// pinDomains has the store admin record the approvers of the named
// domains (every configured one when none are named).
func pinDomains(t testing.TB, s *Service, domains ...string) {
	t.Helper()
	if len(domains) == 0 {
		for _, d := range s.cfg.Domains {
			domains = append(domains, d.Name)
		}
	}
	for _, d := range domains {
		if _, err := s.PinDomain(context.Background(), d, adminBy(t), "test setup"); err != nil {
			t.Fatalf("pin %s: %v", d, err)
		}
	}
}

func orgEntryCount(t *testing.T, db *store.DB) int {
	t.Helper()
	es, err := Entries(context.Background(), db, OrgReceiptID)
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func isInput(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// mallory's config names her the owner and approver of streaming, which
// no proposal has recorded approvers for yet.
func malloryConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse("mine.yaml", []byte(strings.NewReplacer(
		"  - {id: dave,", "  - {id: mallory, name: Mallory, os_users: [mallory]}\n  - {id: dave,",
		"owners: [alice]\n    approvers: [alice, carol]", "owners: [mallory]\n    approvers: [mallory]",
	).Replace(testConfig)))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := Domain(cfg, "streaming"); d.Owners[0] != "mallory" {
		t.Fatalf("mallory's config: %+v", d)
	}
	return cfg
}

func TestSwappedConfigOnFreshDomainIsRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		// billing's approvers are recorded by an agent's proposal; streaming
		// has none on record.
		mustPropose(t, s, holdDAG())
		mine := New(db, malloryConfig(t), clk, nil)
		mallory := Decider{PersonID: "mallory", Channel: ChannelTerminal, OSUser: "mallory", Evidence: map[string]string{"uid": "4242"}}
		admin := adminBy(t)
		// The admin's login under another uid is not the admin.
		impostor := Decider{Channel: ChannelTerminal, OSUser: admin.OSUser, Evidence: map[string]string{"uid": "4242"}}
		before := orgEntryCount(t, db)
		acts := []struct {
			name string
			do   func() error
			want string
		}{
			{"set streaming's autonomy", func() error {
				_, err := mine.SetAutonomy(ctx, "streaming", "L4", mallory, "mine now")
				return err
			}, "domain streaming has no approvers recorded in this store"},
			{"reset streaming's autonomy", func() error {
				_, err := mine.ResetAutonomy(ctx, "streaming", mallory, "mine now")
				return err
			}, "domain streaming has no approvers recorded in this store"},
			{"pin streaming's approvers", func() error {
				_, err := mine.PinDomain(ctx, "streaming", mallory, "mine now")
				return err
			}, "only the store admin"},
			{"pin as the admin's login under another uid", func() error {
				_, err := mine.PinDomain(ctx, "streaming", impostor, "mine now")
				return err
			}, "only the store admin"},
			{"set autonomy as the admin's login under another uid", func() error {
				_, err := mine.SetAutonomy(ctx, "streaming", "L4", impostor, "mine now")
				return err
			}, "is not the store admin"},
		}
		for _, a := range acts {
			err := a.do()
			if !isInput(err) || !strings.Contains(err.Error(), a.want) || !strings.Contains(err.Error(), "dw approvers pin streaming") ||
				!strings.Contains(err.Error(), admin.OSUser) {
				t.Errorf("%s: %v; want a refusal naming the admin %s and dw approvers pin streaming", a.name, err, admin.OSUser)
			}
		}
		if n := orgEntryCount(t, db); n != before {
			t.Errorf("refused acts changed the org receipt: %d entries, were %d", n, before)
		}
		li, err := s.Level(ctx, "streaming")
		if err != nil || li.Level != "L2" || li.Source != "config" {
			t.Errorf("streaming after the refused acts: %+v, %v", li, err)
		}
		recs, err := s.DomainRecords(ctx, "streaming")
		if err != nil || len(recs) != 0 {
			t.Errorf("streaming's records after the refused acts: %+v, %v", recs, err)
		}
	})
}

func TestStoreAdminPinsAndFirstActRecords(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, clk := fixture(t, db)
		admin := adminBy(t)
		a, err := s.StoreAdmin(ctx)
		if err != nil || a.OSUser != admin.OSUser || a.UID != strconv.Itoa(os.Getuid()) {
			t.Fatalf("store admin of a new store: %+v, %v", a, err)
		}
		recs, err := s.PinDomain(ctx, "streaming", admin, "streaming goes live")
		if err != nil || len(recs) != 2 || recs[0].Class != ClassStandard || recs[0].Approvers[0].ID != "alice" || recs[1].Class != ClassLive {
			t.Fatalf("pin: %+v, %v", recs, err)
		}
		if a, err = s.StoreAdmin(ctx); err != nil || !a.Recorded || a.Seq != 1 {
			t.Fatalf("store admin after the first org entry: %+v, %v", a, err)
		}
		// Pinned again from the same config: nothing new is recorded.
		n := orgEntryCount(t, db)
		if recs, err := s.PinDomain(ctx, "streaming", admin, "again"); err != nil || len(recs) != 0 || orgEntryCount(t, db) != n {
			t.Fatalf("second pin: %+v, %v", recs, err)
		}
		// Now on record, alice governs streaming; mallory's config does
		// not change who that is.
		if _, err := s.SetAutonomy(ctx, "streaming", "L3", term(t, s, "alice"), "trial"); err != nil {
			t.Fatalf("alice after the pin: %v", err)
		}
		mine := New(db, malloryConfig(t), clk, nil)
		if _, err := mine.SetAutonomy(ctx, "streaming", "L4", Decider{PersonID: "mallory", Channel: ChannelTerminal, OSUser: "mallory"}, "mine"); !isInput(err) ||
			!strings.Contains(err.Error(), `OS user "mallory" is not a recorded identity of any approver of domain streaming`) {
			t.Errorf("mallory after the pin: %v", err)
		}
		// The admin's own first act on a domain nobody recorded records
		// it: here the admin's login is also alice's, as the admin's
		// config says.
		login := admin.OSUser
		adminCfg := swappedConfig(t, "owners: [carol]", "owners: [carol]\n    approvers: [carol]")
		adminCfg.People[2].OSUsers = append(adminCfg.People[2].OSUsers, login)
		as := New(db, adminCfg, clk, nil)
		if _, err := as.SetAutonomy(ctx, "loyalty", "L2", admin, "carol's domain, set by its admin"); err != nil {
			t.Fatalf("the admin's first act on loyalty: %v", err)
		}
		recs, err = s.DomainRecords(ctx, "loyalty")
		if err != nil || len(recs) != 2 || recs[0].By != "os:"+login || !slices2Contains(recs[0].Approvers[0].OSUsers, login) {
			t.Fatalf("loyalty's records after the admin's act: %+v, %v", recs, err)
		}
		if v, status := orgVerification(t, db); !v.OK || status != StatusOK {
			t.Fatalf("verify: %+v (audit %s)", v, status)
		}
	})
}

func slices2Contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// A store made before admins were recorded: SQLite derives the admin from
// the file's owner, PostgreSQL from the first login acting at the terminal
// in the org receipt; the admin's first act records it.
func TestStoreAdminOfAStoreMadeBeforeAdmins(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		ks, err := s.keys()
		if err != nil {
			t.Fatal(err)
		}
		// The old code's org receipt: no store_admin entry, a stop by a
		// stranger (open to anyone, so it does not count), a resume by ops.
		err = db.InTx(ctx, func(tx *store.Tx) error {
			stop, _ := canonicalJSON(map[string]any{"reason": "old", "os_user": "stranger"})
			if _, err := appendTx(ctx, tx, ks, t0, OrgReceiptID, EntryStop, "os:stranger", stop); err != nil {
				return err
			}
			body, _ := canonicalJSON(map[string]any{"reason": "old", "evidence": map[string]string{"os_user": "ops", "uid": "4343"}})
			_, err := appendTx(ctx, tx, ks, t0, OrgReceiptID, EntryResume, "bob", body)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.StoreAdmin(ctx)
		if err != nil || a.Recorded {
			t.Fatalf("derived admin: %+v, %v", a, err)
		}
		owner := adminBy(t)
		var admin Decider
		switch db.Dialect() {
		case store.SQLite:
			if a.UID != strconv.Itoa(os.Getuid()) || !strings.Contains(a.How, "owner of the SQLite store file") {
				t.Fatalf("SQLite admin: %+v", a)
			}
			admin = owner
			if os.Getuid() == 0 {
				// Another account's file: that account is the admin, and
				// the account running dw is not.
				path, err := sqliteFile(ctx, db)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(path, 4242, -1); err != nil {
					t.Fatal(err)
				}
				defer lookupAs(map[string]string{"4242": "fileowner"})()
				if a, err := s.StoreAdmin(ctx); err != nil || a.UID != "4242" || a.OSUser != "fileowner" {
					t.Fatalf("admin of a file owned by 4242: %+v, %v", a, err)
				}
				if _, err := s.PinDomain(ctx, "streaming", owner, "x"); !isInput(err) || !strings.Contains(err.Error(), "fileowner") {
					t.Fatalf("pin by %s on 4242's store: %v", owner.OSUser, err)
				}
				admin = Decider{Channel: ChannelTerminal, OSUser: "fileowner", Evidence: map[string]string{"uid": "4242"}}
			}
		default:
			if a.OSUser != "ops" || a.UID != "4343" {
				t.Fatalf("PostgreSQL admin: %+v", a)
			}
			if _, err := s.PinDomain(ctx, "streaming", owner, "x"); !isInput(err) || !strings.Contains(err.Error(), "OS user ops (uid 4343)") {
				t.Fatalf("pin by %s: %v", owner.OSUser, err)
			}
			admin = Decider{Channel: ChannelTerminal, OSUser: "ops", Evidence: map[string]string{"uid": "4343"}}
		}
		if _, err := s.PinDomain(ctx, "streaming", admin, "recorded at last"); err != nil {
			t.Fatalf("pin by the derived admin: %v", err)
		}
		if a, err := s.StoreAdmin(ctx); err != nil || !a.Recorded || a.OSUser != admin.OSUser {
			t.Fatalf("admin after its first act: %+v, %v", a, err)
		}
	})
}

// lookupAs makes uids resolve to the given logins, then restores lookup.
func lookupAs(m map[string]string) func() {
	old := lookupUID
	lookupUID = func(uid string) (*user.User, error) {
		if name, ok := m[uid]; ok {
			return &user.User{Uid: uid, Username: name}, nil
		}
		return old(uid)
	}
	return func() { lookupUID = old }
}

// A forged level for a domain the config does not name is cleared with
// dw autonomy reset, by the store admin only.
func TestForgedLevelOfUnconfiguredDomainIsCleared(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, _ := fixture(t, db)
		mustPropose(t, s, holdDAG())
		execSQL(t, db, `INSERT INTO kv (key, value, updated_ms) VALUES ('autonomy.ghost', ?, 0)`, forgedL4)
		if v, _ := orgVerification(t, db); v.OK || governanceFindings(v) != 1 {
			t.Fatalf("verify with a forged ghost level: %+v", v)
		}
		if _, err := s.ResetAutonomy(ctx, "ghost", term(t, s, "bob"), "cleanup"); !isInput(err) || !strings.Contains(err.Error(), "cleared only by its recorded approvers") {
			t.Errorf("bob clearing ghost: %v", err)
		}
		if _, err := s.ResetAutonomy(ctx, "ghost", adminBy(t), ""); !isInput(err) || !strings.Contains(err.Error(), "reason is required") {
			t.Errorf("no reason: %v", err)
		}
		li, err := s.ResetAutonomy(ctx, "ghost", adminBy(t), "forged row found by verify")
		if err != nil || li.Source != "cleared" || li.SetBy != "os:"+adminBy(t).OSUser {
			t.Fatalf("admin clearing ghost: %+v, %v", li, err)
		}
		if v, status := orgVerification(t, db); !v.OK || status != StatusOK {
			t.Fatalf("verify after clearing: %+v (audit %s)", v, status)
		}
		// Nothing held: the usual unknown-domain answer.
		if _, err := s.ResetAutonomy(ctx, "ghost", adminBy(t), "again"); !isInput(err) || !strings.Contains(err.Error(), `no domain "ghost"`) {
			t.Errorf("clearing twice: %v", err)
		}
	})
}
