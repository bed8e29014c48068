package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestRoutinesParse(t *testing.T) {
	src := `
kafka: {brokers: ["k:9092"]}
routines:
  - name: billing-hourly
    cron: "5 * * * *"
    timezone: Europe/Berlin
    checks:
      - {table: "usage.*", period: today, bucket: hour, history_days: 21}
    metrics:
      - {name: avg_balance, window: 3h, history_days: 21}
  - name: lag
    every: 5m
    consumer_lag: [{group: billing-sink, topic: api-usage}]
    topics: [api-usage]
`
	c, err := Parse("dw.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Routines) != 2 || c.Routines[0].Timezone != "Europe/Berlin" || c.Routines[0].Checks[0].HistoryDays != 21 ||
		c.Routines[0].Metrics[0].Window != 3*time.Hour || c.Routines[1].Every != 5*time.Minute || c.Routines[1].ConsumerLag[0].Group != "billing-sink" {
		t.Fatalf("routines = %+v", c.Routines)
	}
}

// Each mistake is reported with the file, the line and the key, in words
// that say what is valid.
func TestRoutinesValidation(t *testing.T) {
	cases := []struct {
		src, want string
	}{
		{"routines:\n  - name: a\n    every: 5m\n", "dw.yaml:2: routines[0]: routine \"a\" observes nothing"},
		{"routines:\n  - name: a\n    topics: [x]\n", "dw.yaml:2: routines[0].cron: missing schedule"},
		{"routines:\n  - name: a\n    cron: \"61 * * * *\"\n    connectors: [x]\nkafka_connect: {url: http://c}\n", "dw.yaml:3: routines[0].cron: \"61 * * * *\" is not a cron expression"},
		{"routines:\n  - name: a\n    cron: \"5 * * * *\"\n    timezone: Mars/Olympus\n    connectors: [x]\nkafka_connect: {url: http://c}\n", "dw.yaml:4: routines[0].timezone: unknown time zone"},
		{"routines:\n  - name: a\n    cron: \"5 * * * *\"\n    every: 5m\n    connectors: [x]\nkafka_connect: {url: http://c}\n", "dw.yaml:4: routines[0].every: give cron or every, not both"},
		{"routines:\n  - name: a\n    every: 90s\n    connectors: [x]\nkafka_connect: {url: http://c}\n", "routines[0].every: 1m30s is not a whole number of minutes"},
		{"routines:\n  - name: Bad Name\n    every: 5m\n    connectors: [x]\nkafka_connect: {url: http://c}\n", "dw.yaml:2: routines[0].name: \"Bad Name\" is not a valid routine name"},
		{"routines:\n  - {name: a, every: 5m, topics: [x]}\n", "routines[0].topics: needs kafka: configured"},
		{"routines:\n  - name: a\n    every: 5m\n    checks:\n      - {table: t, period: fortnight}\n", "dw.yaml:5: routines[0].checks[0].period: unknown period \"fortnight\""},
		{"routines:\n  - name: a\n    every: 5m\n    checks:\n      - {table: \"t; DROP TABLE x\"}\n", "routines[0].checks[0].table: \"t; DROP TABLE x\" is not a table name or glob"},
		{"routines:\n  - name: a\n    every: 5m\n    checks:\n      - {table: t, history_days: 4000}\n", "routines[0].checks[0].history_days: 4000 is out of range"},
		{"warehouses: [{name: w, kind: duckdb, path: /x}]\nroutines:\n  - name: a\n    every: 5m\n    checks:\n      - {table: t, warehouse: nope}\n", "routines[0].checks[0].warehouse: unknown warehouse \"nope\"; configured: w"},
		{"routines:\n  - {name: a, every: 5m, metrics: [{name: m}]}\n  - {name: a, every: 5m, metrics: [{name: m}]}\n", "routines[1].name: duplicate routine name \"a\""},
		{"routines:\n  - {name: a, every: 5m, metrics: [{name: \"\"}]}\n", "routines[0].metrics[0].name: missing"},
		{"routines:\n  - {name: a, evry: 5m}\n", "unknown field \"evry\""},
		{"routines:\n  - {name: a, cron: \"@every 5m\", metrics: [{name: m}]}\n", "routines[0].cron: @every is not a schedule watchers can agree on"},
	}
	for _, c := range cases {
		_, err := Parse("dw.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %q", c.src, err, c.want)
		}
	}
}

// The embedded default's routines pass the same validation a file's do.
func TestDemoRoutinesAreValid(t *testing.T) {
	c := &Config{Routines: DemoRoutines()}
	if errs := c.validateRoutines(); len(errs) > 0 {
		t.Fatalf("demo routines: %+v", errs)
	}
}

// The README's routines example is valid with the main example's Kafka
// and Kafka Connect.
func TestReadmeRoutinesExampleParses(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(text string) string {
		start := strings.Index(text, "```yaml\n")
		if start < 0 {
			t.Fatal("no yaml block")
		}
		rest := text[start+len("```yaml\n"):]
		return rest[:strings.Index(rest, "```")]
	}
	text := string(raw)
	w := strings.Index(text, "## Watching")
	if w < 0 {
		t.Fatal("README has no Watching section")
	}
	c, err := Parse("README.md", []byte(block(text)+block(text[w:])))
	if err != nil {
		t.Fatalf("the README's routines example does not parse: %v", err)
	}
	if len(c.Routines) == 0 {
		t.Fatal("no routines in the README example")
	}
}
