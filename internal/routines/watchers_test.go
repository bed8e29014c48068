package routines

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
	"github.com/dataworkers/dw/internal/storeconfig"
)

// TestMain doubles as a watcher process: with DW_ROUTINES_CHILD naming a
// dw.yaml, the test binary runs `dw watch --once` at each instant of
// DW_ROUTINES_AT, printing each summary as a JSON line, so tests can run
// several real watchers against one store and kill one of them.
func TestMain(m *testing.M) {
	if path := os.Getenv("DW_ROUTINES_CHILD"); path != "" {
		os.Exit(child(path))
	}
	os.Exit(m.Run())
}

func child(path string) int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	data, err := os.ReadFile(path)
	if err != nil {
		log.Error("read config", "err", err)
		return 2
	}
	cfg, err := config.Parse(path, data)
	if err != nil {
		log.Error("parse config", "err", err)
		return 2
	}
	db, err := storeconfig.Open(ctx, cfg)
	if err != nil {
		log.Error("open store", "err", err)
		return 2
	}
	defer db.Close()
	lease, _ := time.ParseDuration(os.Getenv("DW_ROUTINES_LEASE"))
	enc := json.NewEncoder(os.Stdout)
	for _, at := range strings.Split(os.Getenv("DW_ROUTINES_AT"), ",") {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			log.Error("bad instant", "at", at)
			return 2
		}
		clk := clock.NewOffset(t)
		r, err := New(Options{DB: db, Config: cfg, Graph: lineage.New(db, clk), Clock: clk, Sources: testSources(cfg),
			Watcher: os.Getenv("DW_ROUTINES_WATCHER"), Lease: lease, Parallel: 4, Log: log})
		if err != nil {
			log.Error("runner", "err", err)
			return 2
		}
		runs, err := r.RunDue(ctx, t.Truncate(time.Minute))
		if err != nil {
			log.Error("run", "err", err)
			return 1
		}
		if err := enc.Encode(runs); err != nil {
			return 1
		}
	}
	return 0
}

// watcherProc starts a watcher process.
func watcherProc(t *testing.T, cfgPath, name string, lease time.Duration, ats ...time.Time) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, a := range ats {
		list = append(list, a.Format(time.RFC3339))
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "DW_ROUTINES_CHILD="+cfgPath, "DW_ROUTINES_AT="+strings.Join(list, ","),
		"DW_ROUTINES_WATCHER="+name, "DW_ROUTINES_LEASE="+lease.String())
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

func pgConfig(t *testing.T, fc *fakeConnect, routines string) (string, *config.Config) {
	t.Helper()
	yaml := fmt.Sprintf("store: {driver: postgres, url: %q}\nkafka_connect: {url: %s}\nroutines:\n%s", storetest.PostgresSchemaURL(t), fc.url, routines)
	path := filepath.Join(t.TempDir(), "dw.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return path, cfg
}

// Two watcher processes share a PostgreSQL store and the same schedule:
// no tick of any routine runs twice, and every due tick runs once, by one
// of them, or is counted missed by the routine's next run. A run that
// outlasts the next tick (a loaded machine, where the ticks here come as
// fast as the watchers take them) holds its routine, so that tick is
// skipped and the next run catches up once (Run.Missed), as after
// downtime; the last tick always runs.
func TestTwoWatchersRunEachTickOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	fc := newFakeConnect(t)
	var b strings.Builder
	const nRoutines, nTicks = 20, 6
	for i := 0; i < nRoutines; i++ {
		fmt.Fprintf(&b, "  - {name: r%02d, every: 1m, connectors: [orders-sink]}\n", i)
	}
	path, cfg := pgConfig(t, fc, b.String())
	db, err := storeconfig.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ats []time.Time
	for i := 0; i < nTicks; i++ {
		ats = append(ats, utc("2026-03-10T15:00:20Z").Add(time.Duration(i)*time.Minute))
	}
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, name := range []string{"watcher-a", "watcher-b"} {
		cmd, out := watcherProc(t, path, name, 10*time.Second, ats...)
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("watcher: %v", err)
		}
	}
	ran := map[string][]string{} // routine@tick -> watchers
	byWatcher := map[string]int{}
	accounted := map[string]int{} // routine -> ticks run or counted missed
	caughtUp := 0
	for _, out := range outs {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var runs []Run
			if err := json.Unmarshal(sc.Bytes(), &runs); err != nil {
				t.Fatalf("watcher output: %v", err)
			}
			for _, r := range runs {
				if r.Status != StatusOK {
					t.Errorf("%s@%s: %s %s", r.Routine, r.Tick, r.Status, r.Error)
				}
				key := r.Routine + "@" + r.Tick.Format(time.RFC3339)
				ran[key] = append(ran[key], r.Watcher)
				byWatcher[r.Watcher]++
				accounted[r.Routine] += 1 + r.Missed
				if r.Missed > 0 {
					caughtUp++
				}
			}
		}
	}
	for i := 0; i < nRoutines; i++ {
		name := fmt.Sprintf("r%02d", i)
		for k, at := range ats {
			key := name + "@" + at.Truncate(time.Minute).Format(time.RFC3339)
			if n := len(ran[key]); n > 1 || (k == len(ats)-1 && n != 1) {
				t.Errorf("%s ran %d times (%v), want once (at most once before the last tick)", key, n, ran[key])
			}
		}
		if accounted[name] != nTicks {
			t.Errorf("%s: %d ticks run or counted missed, want %d", name, accounted[name], nTicks)
		}
	}
	res, err := List(context.Background(), db, ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != len(ran) {
		t.Errorf("store holds %d runs, the watchers reported %d", res.Total, len(ran))
	}
	t.Logf("runs per watcher: %v; %d runs caught up a tick their routine's previous run outlasted", byWatcher, caughtUp)
}

// A watcher killed with SIGKILL mid-run: its tick is not run again by
// another watcher, the routine stays taken while the lease lives, and
// once the lease runs out the next tick runs and the killed run is
// recorded as lost.
func TestKilledWatcherLosesItsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	fc := newFakeConnect(t)
	path, cfg := pgConfig(t, fc, "  - {name: sinks, every: 5m, connectors: [orders-sink]}\n")
	db, err := storeconfig.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t1 := utc("2026-03-10T15:05:00Z")
	fc.hold.Store(true)
	cmd, _ := watcherProc(t, path, "doomed", 10*time.Second, t1)
	select {
	case <-fc.held:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the watcher never started its run")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	fc.hold.Store(false)
	close(fc.release)
	runs := storedRuns(t, db)
	if len(runs) != 1 || runs[0].Status != StatusRunning || runs[0].Watcher != "doomed" {
		t.Fatalf("after the kill: %+v", runs)
	}

	wall := clock.NewFake(time.Now())
	survivor := func(at time.Time) []*Run {
		clk := clock.NewFake(at)
		r, err := New(Options{DB: db, Config: cfg, Graph: lineage.New(db, clk), Clock: clk, Wall: wall, Sources: testSources(cfg),
			Watcher: "survivor", Lease: 3 * time.Second, Log: quietLog})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.RunDue(context.Background(), at.Truncate(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The killed watcher's tick is not run a second time.
	if got := survivor(t1.Add(30 * time.Second)); len(got) != 0 {
		t.Fatalf("the killed run's tick ran again: %+v", got)
	}
	// The next tick, while the dead watcher's lease still lives: the
	// routine is still taken (never two runs at once).
	t2 := t1.Add(5 * time.Minute)
	if got := survivor(t2); len(got) != 0 {
		t.Fatalf("ran while the killed watcher's lease was alive: %+v", got)
	}
	// Once the lease has run out, the next tick runs.
	wall.Advance(time.Minute)
	got := survivor(t2.Add(10 * time.Second))
	if len(got) != 1 || got[0].Status != StatusOK || !got[0].Tick.Equal(t2) || got[0].Watcher != "survivor" {
		t.Fatalf("after the lease ran out: %+v", got)
	}
	runs = storedRuns(t, db)
	if len(runs) != 2 {
		t.Fatalf("%d runs stored, want the lost one and the next", len(runs))
	}
	if old := runs[1]; old.Status != StatusLost || !old.Tick.Equal(t1) || old.Error == "" || old.Finished.IsZero() {
		t.Fatalf("killed run recorded as %+v, want lost", old)
	}
}

func storedRuns(t *testing.T, db *store.DB) []Run {
	t.Helper()
	res, err := List(context.Background(), db, ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Runs
}
