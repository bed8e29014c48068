package routines

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/connect"
	"github.com/dataworkers/dw/internal/connect/connecttest"
	"github.com/dataworkers/dw/internal/flink"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/kafka"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// streamConfig watches two sink connectors; sam owns the Kafka topics.
const streamConfig = `
kafka_connect: {url: CONNECT_URL}
kafka: {name: prod, brokers: ["127.0.0.1:1"]}
people:
  - {id: sam, name: Sam Okafor, slack_id: U0SAM}
  - {id: bea, name: Bea Lindqvist, slack_id: U0BEA}
domains:
  - {name: streaming, assets: ["kafka://**"], owners: [sam], copy: [bea]}
routines:
  - name: sinks
    every: 5m
    connectors: [orders-sink, payments-sink]
`

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeConnect is a Connect worker with two sinks, behind a proxy that can
// hold requests (a run in flight) until released.
type fakeConnect struct {
	*connecttest.Server
	url     string
	hold    atomic.Bool
	release chan struct{}
	held    chan struct{}
}

func newFakeConnect(t *testing.T) *fakeConnect {
	t.Helper()
	f := &fakeConnect{Server: connecttest.NewServer(), release: make(chan struct{}), held: make(chan struct{}, 100)}
	t.Cleanup(f.Server.Close)
	for _, c := range []struct{ name, topic string }{{"orders-sink", "orders"}, {"payments-sink", "payments"}} {
		if err := f.AddConnector(c.name, map[string]string{
			"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": c.topic, "file": "/tmp/x"}, 1); err != nil {
			t.Fatal(err)
		}
	}
	target, _ := url.Parse(f.Server.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.hold.Load() {
			f.held <- struct{}{}
			select {
			case <-f.release:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})}
	ln := listen(t)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.url = "http://" + ln.Addr().String()
	return f
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// writeConfig parses yaml as a dw.yaml file with a fresh DW_HOME.
func writeConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	t.Setenv("DW_HOME", t.TempDir())
	path := filepath.Join(t.TempDir(), "dw.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func parseConfig(t *testing.T, yaml string, f *fakeConnect) *config.Config {
	t.Helper()
	return writeConfig(t, strings.ReplaceAll(yaml, "CONNECT_URL", f.url))
}

// slackPost is one chat.postMessage the fake Slack received.
type slackPost struct{ Channel, ThreadTS, Text, TS string }

type fakeSlack struct {
	*slacktest.Server
	mu    sync.Mutex
	posts []slackPost
	n     int
}

func newFakeSlack(t *testing.T) (*fakeSlack, *SlackNotifier) {
	f := &fakeSlack{}
	f.Server = slacktest.NewTestServer(func(c slacktest.Customize) {
		c.Handle("/chat.postMessage", func(w http.ResponseWriter, r *http.Request) {
			if err := r.ParseForm(); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			f.mu.Lock()
			f.n++
			ts := "1700000000." + strings.Repeat("0", 5) + string(rune('0'+f.n%10))
			f.posts = append(f.posts, slackPost{Channel: r.FormValue("channel"), ThreadTS: r.FormValue("thread_ts"), Text: r.FormValue("text"), TS: ts})
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true,"channel":"`+r.FormValue("channel")+`","ts":"`+ts+`"}`)
		})
	})
	f.Start()
	t.Cleanup(f.Stop)
	return f, &SlackNotifier{api: slack.New("xoxb-test", slack.OptionAPIURL(f.GetAPIURL()))}
}

func (f *fakeSlack) all() []slackPost {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slackPost(nil), f.posts...)
}

// testSources reaches the systems cfg names with plain clients, where dw
// watch gives its deps'.
func testSources(cfg *config.Config) Sources {
	s := Sources{Cluster: "default"}
	if k := cfg.Kafka; k != nil && k.Name != "" {
		s.Cluster = k.Name
	}
	if k := cfg.Kafka; k != nil {
		s.Kafka = func(ctx context.Context) (*kafka.Client, error) {
			return kafka.NewClient(ctx, kafka.Config{Brokers: k.Brokers, DialTimeout: k.Timeout})
		}
	}
	if c := cfg.KafkaConnect; c != nil {
		s.Connect = func() (*connect.Client, error) { return connect.NewClient(c.URL, c.Timeout) }
	}
	if c := cfg.SchemaRegistry; c != nil {
		s.Registry = func() (*registry.Client, error) { return registry.New(registry.Config{URL: c.URL, Timeout: c.Timeout}) }
	}
	if c := cfg.Flink; c != nil {
		s.Flink = func() (*flink.Client, error) { return flink.NewClient(c.URL, c.Timeout) }
	}
	return s
}

func newRunner(t *testing.T, db *store.DB, cfg *config.Config, clk clock.Clock, n Notifier) *Runner {
	t.Helper()
	o := Options{DB: db, Config: cfg, Graph: lineage.New(db, clk), Clock: clk, Sources: testSources(cfg), Watcher: "test", Log: quietLog, Lease: time.Second}
	if n != nil {
		o.Notifier = n
	}
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func runOnce(t *testing.T, r *Runner, clk *clock.Fake) []*Run {
	t.Helper()
	runs, err := r.RunDue(context.Background(), clk.Now().Truncate(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// The owner hears first, in Slack: one direct message per incident, and
// what later runs see about it is threaded under that message.
func TestOwnerHearsFirstInSlack(t *testing.T) {
	fc := newFakeConnect(t)
	cfg := parseConfig(t, streamConfig, fc)
	db := storetest.SQLite(t)
	slk, notifier := newFakeSlack(t)
	clk := clock.NewFake(utc("2026-03-10T15:05:00Z"))
	r := newRunner(t, db, cfg, clk, notifier)
	for _, c := range []string{"orders-sink", "payments-sink"} {
		if err := fc.SetTaskState(c, 0, "FAILED", "org.apache.kafka.connect.errors.ConnectException: disk full"); err != nil {
			t.Fatal(err)
		}
	}
	runs := runOnce(t, r, clk)
	if len(runs) != 1 || runs[0].Status != StatusFlagged || len(runs[0].Incidents) != 2 {
		t.Fatalf("first run: %+v", runs)
	}
	posts := slk.all()
	if len(posts) != 2 {
		t.Fatalf("%d Slack posts for 2 incidents, want one each: %+v", len(posts), posts)
	}
	roots := map[string]string{} // incident -> ts
	for i, inc := range runs[0].Incidents {
		if !inc.Opened || !strings.HasPrefix(inc.Asset, "kafka://prod/") {
			t.Errorf("incident %+v", inc)
		}
		n := runs[0].Notified[i]
		if n.Person != "sam" || n.Name != "Sam Okafor" || n.Via != "slack" || !n.Sent || n.Channel != "U0SAM" || n.ThreadTS != "" || n.Incident != inc.ID {
			t.Errorf("notified %+v", n)
		}
		roots[inc.ID] = n.TS
	}
	for _, p := range posts {
		if p.Channel != "U0SAM" || p.ThreadTS != "" || !strings.Contains(p.Text, "diagnose_incident") {
			t.Errorf("first message %+v: want a direct message to sam naming what to run next", p)
		}
	}
	// Five minutes later the sinks are still failing: the findings join
	// the same incidents and go in their threads.
	clk.Advance(5 * time.Minute)
	runs = runOnce(t, r, clk)
	if len(runs) != 1 || len(runs[0].Incidents) != 2 {
		t.Fatalf("second run: %+v", runs)
	}
	for _, inc := range runs[0].Incidents {
		if inc.Opened {
			t.Errorf("second run opened %s again; it should join", inc.ID)
		}
	}
	posts = slk.all()
	if len(posts) != 4 {
		t.Fatalf("%d posts after the second run, want 4", len(posts))
	}
	for _, n := range runs[0].Notified {
		if !n.Sent || n.ThreadTS == "" || n.ThreadTS != roots[n.Incident] {
			t.Errorf("follow-up %+v: want threaded under %s", n, roots[n.Incident])
		}
	}
	for _, p := range posts[2:] {
		if p.ThreadTS == "" || p.Channel != "U0SAM" {
			t.Errorf("follow-up post %+v not threaded", p)
		}
	}
}

// Without Slack the run records who would have been told, first message
// and follow-ups alike, and nothing is posted anywhere.
func TestWithoutSlackRecordsWhoWouldBeTold(t *testing.T) {
	fc := newFakeConnect(t)
	cfg := parseConfig(t, streamConfig, fc)
	db := storetest.SQLite(t)
	clk := clock.NewFake(utc("2026-03-10T15:05:00Z"))
	r := newRunner(t, db, cfg, clk, nil)
	if err := fc.SetConnectorState("orders-sink", "FAILED", "boom"); err != nil {
		t.Fatal(err)
	}
	runs := runOnce(t, r, clk)
	if len(runs) != 1 || len(runs[0].Notified) != 1 {
		t.Fatalf("run: %+v", runs)
	}
	n := runs[0].Notified[0]
	if n.Person != "sam" || n.Via != "none" || n.Sent || !strings.Contains(n.Note, "would have been") || n.Incident != runs[0].Incidents[0].ID {
		t.Fatalf("notified %+v", n)
	}
	stored, err := GetRun(context.Background(), db, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Notified) != 1 || stored.Notified[0].Person != "sam" || stored.Notified[0].Via != "none" {
		t.Fatalf("stored run lost who would have been told: %+v", stored.Notified)
	}
}

// A healthy stretch stays quiet: an hour of runs, every one ok, no
// incident, nobody messaged.
func TestHealthyStretchStaysQuiet(t *testing.T) {
	fc := newFakeConnect(t)
	cfg := parseConfig(t, streamConfig, fc)
	db := storetest.SQLite(t)
	slk, notifier := newFakeSlack(t)
	clk := clock.NewFake(utc("2026-03-10T09:00:00Z"))
	r := newRunner(t, db, cfg, clk, notifier)
	total := 0
	for i := 0; i < 12; i++ {
		for _, run := range runOnce(t, r, clk) {
			total++
			if run.Status != StatusOK || len(run.Incidents) != 0 || len(run.Notified) != 0 || len(run.Findings) != 2 {
				t.Fatalf("healthy run %+v", run)
			}
		}
		clk.Advance(5 * time.Minute)
	}
	if total != 12 {
		t.Fatalf("%d runs in an hour of every: 5m, want 12", total)
	}
	if p := slk.all(); len(p) != 0 {
		t.Fatalf("quiet hour posted %d Slack messages", len(p))
	}
	list, _, err := (&incidents.Service{DB: db, Clock: clk}).ListIncidents(context.Background(), incidents.IncidentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("quiet hour opened %d incidents", len(list))
	}
}

// Stopping a watcher lets the run in flight finish within the grace
// period, and cancels (and records) one that does not.
func TestWatchStopsCleanly(t *testing.T) {
	for _, finishes := range []bool{true, false} {
		name := map[bool]string{true: "finishes", false: "canceled"}[finishes]
		t.Run(name, func(t *testing.T) {
			fc := newFakeConnect(t)
			cfg := parseConfig(t, streamConfig, fc)
			db := storetest.SQLite(t)
			clk := clock.NewFake(utc("2026-03-10T15:05:00Z"))
			r := newRunner(t, db, cfg, clk, nil)
			r.o.Grace = 300 * time.Millisecond
			fc.hold.Store(true)
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Watch(ctx) }()
			select {
			case <-fc.held:
			case <-time.After(10 * time.Second):
				t.Fatal("the run never reached Kafka Connect")
			}
			stop() // SIGTERM
			if finishes {
				fc.hold.Store(false)
				close(fc.release)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Watch: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Watch did not return after the stop")
			}
			res, err := List(context.Background(), db, ListParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Runs) != 1 {
				t.Fatalf("%d runs recorded", len(res.Runs))
			}
			want := StatusOK
			if !finishes {
				want = StatusCanceled
			}
			if got := res.Runs[0]; got.Status != want || got.Finished.IsZero() {
				t.Fatalf("run after stop: %s (finished %s), want %s", got.Status, got.Finished, want)
			}
			if !finishes {
				close(fc.release)
			}
		})
	}
}

// After downtime the watcher catches up once, for the latest tick, and
// the run says how many ticks it skipped.
func TestCatchUpOnceAfterDowntime(t *testing.T) {
	fc := newFakeConnect(t)
	cfg := parseConfig(t, streamConfig, fc)
	db := storetest.SQLite(t)
	clk := clock.NewFake(utc("2026-03-10T10:05:00Z"))
	r := newRunner(t, db, cfg, clk, nil)
	if runs := runOnce(t, r, clk); len(runs) != 1 {
		t.Fatalf("first: %+v", runs)
	}
	// Down from 10:05 until 11:02 (a new process: nothing in memory).
	clk.Set(utc("2026-03-10T11:02:00Z"))
	r = newRunner(t, db, cfg, clk, nil)
	runs, err := r.RunDue(context.Background(), clk.Now().Truncate(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || !runs[0].Tick.Equal(utc("2026-03-10T11:00:00Z")) || runs[0].Missed != 10 ||
		!strings.Contains(runs[0].Summary, "caught up once for 10 missed tick(s)") {
		t.Fatalf("after downtime: %+v", runs)
	}
	if again := runOnce(t, r, clk); len(again) != 0 {
		t.Fatalf("caught up twice: %+v", again)
	}
}

// Two routines that see the same failure at the same tick meet on one
// incident, and its owner gets one first message, the other threaded.
func TestConcurrentRoutinesPostOneFirstMessage(t *testing.T) {
	fc := newFakeConnect(t)
	cfg := parseConfig(t, strings.Replace(streamConfig, "    connectors: [orders-sink, payments-sink]\n",
		"    connectors: [orders-sink]\n  - {name: sinks-too, every: 5m, connectors: [orders-sink]}\n", 1), fc)
	db := storetest.SQLite(t)
	slk, notifier := newFakeSlack(t)
	clk := clock.NewFake(utc("2026-03-10T15:05:00Z"))
	r := newRunner(t, db, cfg, clk, notifier)
	if err := fc.SetConnectorState("orders-sink", "FAILED", "boom"); err != nil {
		t.Fatal(err)
	}
	runs := runOnce(t, r, clk)
	if len(runs) != 2 || runs[0].Incidents[0].ID != runs[1].Incidents[0].ID {
		t.Fatalf("runs: %+v", runs)
	}
	roots, threaded := 0, 0
	for _, p := range slk.all() {
		if p.ThreadTS == "" {
			roots++
		} else {
			threaded++
		}
	}
	if roots != 1 || threaded != 1 {
		t.Fatalf("%d first messages and %d threaded for one incident, want 1 and 1", roots, threaded)
	}
}

// The owner's first message says what was seen, the incident, what was
// proposed and who decides, and what to run next.
func TestOwnerMessage(t *testing.T) {
	cfg := &config.Config{People: []config.Person{{ID: "sam", Name: "Sam Okafor"}, {ID: "bea", Name: "Bea Lindqvist"}}}
	r := &Runner{o: Options{Config: cfg}}
	inc := Incident{ID: "INC-7", Opened: true, Status: "proposed", Asset: "duckdb://usage.usage_hourly"}
	text := r.message("usage-billing", inc, owner{"sam", "owner of duckdb://usage.usage_hourly in the catalog"},
		[]string{"egress_bytes null in 85.2% of rows at 15:00 (0% in every earlier check, 504 points)"},
		[]Proposal{{ID: "P-1", What: "Hold the Stripe sync", Approver: "bea"}, {Target: "airflow://dag/x", Note: "paused: dw stop is on"}}, true)
	for _, want := range []string{"Sam Okafor", "opened incident INC-7", "85.2%", "Proposed P-1: Hold the Stripe sync; Bea Lindqvist (bea) decides",
		"Hold of airflow://dag/x paused", "diagnose_incident INC-7"} {
		if !strings.Contains(text, want) {
			t.Errorf("message lacks %q:\n%s", want, text)
		}
	}
	follow := r.message("usage-billing", inc, owner{"sam", "x"}, []string{"still null"}, nil, false)
	if strings.Contains(follow, "diagnose_incident") || !strings.Contains(follow, "saw more on incident INC-7") {
		t.Errorf("follow-up:\n%s", follow)
	}
}
