package config

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Routine is watching that runs on a schedule (`dw watch`): what it
// observes and when. A routine observes and may open or join incidents;
// it never changes a stream, a job or a table.
type Routine struct {
	// Name identifies the routine in the store and in `dw routines`.
	Name string `yaml:"name"`
	// Cron is a five-field cron expression ("5 * * * *"), optionally
	// prefixed with CRON_TZ=Zone; Timezone sets the zone otherwise (UTC
	// when neither does). Exactly one of Cron and Every is set.
	Cron     string `yaml:"cron"`
	Timezone string `yaml:"timezone"`
	// Every runs the routine at fixed intervals aligned to the Unix epoch
	// (every: 5m runs at :00, :05, …), so several watchers agree on ticks.
	Every time.Duration `yaml:"every"`
	// Timeout bounds one run (default 10m); a run past it is cancelled.
	Timeout time.Duration `yaml:"timeout"`

	// What the routine observes. At least one list is non-empty.
	Checks      []RoutineCheck  `yaml:"checks"`
	Metrics     []RoutineMetric `yaml:"metrics"`
	ConsumerLag []RoutineLag    `yaml:"consumer_lag"`
	Topics      []string        `yaml:"topics"`
	Connectors  []string        `yaml:"connectors"`
	// Subjects are Schema Registry subjects whose new versions are
	// written to the change log; FlinkJobs are job names (or ids) whose
	// restores are.
	Subjects  []string `yaml:"schema_subjects"`
	FlinkJobs []string `yaml:"flink_jobs"`
}

// RoutineCheck is a quality check on a table or on every table a glob
// matches (usage.*).
type RoutineCheck struct {
	// Table is table, schema.table or a glob over schema.table ("usage.*").
	Table string `yaml:"table"`
	// Warehouse names a configured warehouse; default the first.
	Warehouse string `yaml:"warehouse"`
	// Period is today, yesterday, last_24h or last_7d (default: today for
	// hourly buckets, the check's own default otherwise).
	Period string `yaml:"period"`
	// Bucket is hour, day or empty (the whole window at once).
	Bucket string `yaml:"bucket"`
	// HistoryDays is how many days of history the routine records (without
	// judging) the first time it checks a table, so the first judged run
	// has a baseline. 0 records none.
	HistoryDays int `yaml:"history_days"`
}

// RoutineMetric is a team metric (define_metric) computed and judged.
type RoutineMetric struct {
	Name string `yaml:"name"`
	// Window is how many complete hours (or days) back to compute, ending
	// at the last complete one; default the last complete hour.
	Window time.Duration `yaml:"window"`
	// HistoryDays is recorded as history before the first judged run.
	HistoryDays int `yaml:"history_days"`
}

// RoutineLag is consumer lag of one group (optionally on one topic).
type RoutineLag struct {
	Group string `yaml:"group"`
	Topic string `yaml:"topic"`
}

// Compiled on first use: a counted repetition like {0,254} compiles to
// one instruction per count, hundreds of KB built at every agent start.
var routineNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`) })

// RoutineKinds lists the keys a routine may observe with, for messages.
var RoutineKinds = []string{"checks", "metrics", "consumer_lag", "topics", "connectors", "schema_subjects", "flink_jobs"}

// maxHistoryDays bounds a first-run backfill: a typo must not make the
// warehouse scan years.
const maxHistoryDays = 90

// CronParser is the one cron dialect dw.yaml accepts: five fields, with
// descriptors (@hourly) and an optional CRON_TZ= prefix.
var CronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func (c *Config) validateRoutines() []fieldError {
	var errs []fieldError
	add := func(path, format string, args ...any) {
		errs = append(errs, fieldError{path, fmt.Sprintf(format, args...)})
	}
	whs := map[string]bool{}
	for _, w := range c.Warehouses {
		whs[w.Name] = true
	}
	names := map[string]bool{}
	for i, r := range c.Routines {
		p := fmt.Sprintf("$.routines[%d]", i)
		switch {
		case r.Name == "":
			add(p+".name", "missing; every routine needs a name (lower-case letters, digits, . _ -)")
		case !routineNameRE().MatchString(r.Name):
			add(p+".name", "%q is not a valid routine name: use 1 to 63 lower-case letters, digits, . _ or -, starting with a letter or digit", r.Name)
		case names[r.Name]:
			add(p+".name", "duplicate routine name %q", r.Name)
		}
		names[r.Name] = true
		switch {
		case r.Cron == "" && r.Every == 0:
			add(p+".cron", "missing schedule: give cron (e.g. \"5 * * * *\", with timezone: Europe/Berlin) or every (e.g. 5m)")
		case r.Cron != "" && r.Every != 0:
			add(p+".every", "give cron or every, not both")
		case r.Every < 0:
			add(p+".every", "must be positive, e.g. 5m")
		case r.Every != 0 && (r.Every < time.Minute || r.Every%time.Minute != 0):
			add(p+".every", "%s is not a whole number of minutes; the shortest interval is 1m", r.Every)
		case r.Cron != "":
			if strings.Contains(r.Cron, "@every") {
				add(p+".cron", "@every is not a schedule watchers can agree on; use every: (e.g. every: 5m), which runs at fixed times")
			} else if r.Timezone != "" && strings.HasPrefix(strings.TrimSpace(r.Cron), "CRON_TZ=") {
				add(p+".timezone", "the cron expression already names a zone with CRON_TZ=; give one or the other")
			} else if _, err := CronParser.Parse(r.Cron); err != nil {
				add(p+".cron", "%q is not a cron expression (%v); use five fields: minute hour day-of-month month day-of-week, e.g. \"5 * * * *\"", r.Cron, err)
			}
		}
		if r.Timezone != "" {
			if r.Every != 0 {
				add(p+".timezone", "timezone applies to cron schedules; every runs at fixed intervals")
			} else if _, err := time.LoadLocation(r.Timezone); err != nil {
				add(p+".timezone", "unknown time zone %q; use an IANA name such as Europe/Berlin or America/New_York", r.Timezone)
			}
		}
		if r.Timeout < 0 {
			add(p+".timeout", "must be positive, e.g. 10m")
		}
		if len(r.Checks)+len(r.Metrics)+len(r.ConsumerLag)+len(r.Topics)+len(r.Connectors)+len(r.Subjects)+len(r.FlinkJobs) == 0 {
			add(p, "routine %q observes nothing: add at least one of %s", r.Name, strings.Join(RoutineKinds, ", "))
		}
		for j, ch := range r.Checks {
			cp := fmt.Sprintf("%s.checks[%d]", p, j)
			if strings.TrimSpace(ch.Table) == "" {
				add(cp+".table", "missing; name a table (usage.usage_hourly) or a glob (usage.*)")
			} else if strings.ContainsAny(ch.Table, "\x00;'\"` \t\n") {
				add(cp+".table", "%q is not a table name or glob: use schema.table with letters, digits, _ and the glob characters * ? [ ]", ch.Table)
			}
			if ch.Warehouse != "" && !whs[ch.Warehouse] && len(c.Warehouses) > 0 {
				add(cp+".warehouse", "unknown warehouse %q; configured: %s", ch.Warehouse, strings.Join(warehouseNames(c), ", "))
			}
			switch ch.Period {
			case "", "today", "yesterday", "last_24h", "last_7d":
			default:
				add(cp+".period", "unknown period %q; valid: today, yesterday, last_24h, last_7d", ch.Period)
			}
			switch ch.Bucket {
			case "", "hour", "day":
			default:
				add(cp+".bucket", "unknown bucket %q; valid: hour, day (or leave it out for the whole window)", ch.Bucket)
			}
			if ch.HistoryDays < 0 || ch.HistoryDays > maxHistoryDays {
				add(cp+".history_days", "%d is out of range: use 0 to %d", ch.HistoryDays, maxHistoryDays)
			}
		}
		for j, m := range r.Metrics {
			mp := fmt.Sprintf("%s.metrics[%d]", p, j)
			if strings.TrimSpace(m.Name) == "" {
				add(mp+".name", "missing; name a metric defined with define_metric")
			}
			if m.Window < 0 || m.Window > 31*24*time.Hour {
				add(mp+".window", "%s is out of range: use up to 744h (31 days), e.g. 6h", m.Window)
			}
			if m.HistoryDays < 0 || m.HistoryDays > maxHistoryDays {
				add(mp+".history_days", "%d is out of range: use 0 to %d", m.HistoryDays, maxHistoryDays)
			}
		}
		needs := func(key string, list int, ok bool, what string) {
			if list > 0 && !ok {
				add(p+"."+key, "needs %s configured in this file", what)
			}
		}
		needs("consumer_lag", len(r.ConsumerLag), c.Kafka != nil, "kafka:")
		needs("topics", len(r.Topics), c.Kafka != nil, "kafka:")
		needs("connectors", len(r.Connectors), c.KafkaConnect != nil, "kafka_connect:")
		needs("schema_subjects", len(r.Subjects), c.SchemaRegistry != nil, "schema_registry:")
		needs("flink_jobs", len(r.FlinkJobs), c.Flink != nil, "flink:")
		for j, l := range r.ConsumerLag {
			if strings.TrimSpace(l.Group) == "" {
				add(fmt.Sprintf("%s.consumer_lag[%d].group", p, j), "missing; name the consumer group")
			}
		}
		for key, list := range map[string][]string{"topics": r.Topics, "connectors": r.Connectors, "schema_subjects": r.Subjects, "flink_jobs": r.FlinkJobs} {
			for j, v := range list {
				if strings.TrimSpace(v) == "" || strings.ContainsRune(v, 0) {
					add(fmt.Sprintf("%s.%s[%d]", p, key, j), "empty or invalid name")
				}
			}
		}
	}
	return errs
}

func warehouseNames(c *Config) []string {
	var out []string
	for _, w := range c.Warehouses {
		out = append(out, w.Name)
	}
	return out
}

// DemoRoutines are the routines the embedded default watches with: the
// two scenario packs' tables and team metrics, hourly at :05 (the demo's
// incidents show at 15:05 UTC). Each first run records three weeks of
// history so the first judged run has a baseline.
func DemoRoutines() []Routine {
	return []Routine{
		{Name: "usage-billing", Cron: "5 * * * *", Timezone: "UTC",
			Checks: []RoutineCheck{{Table: "usage.usage_hourly", Period: "today", Bucket: "hour", HistoryDays: 21}}},
		{Name: "loyalty-points", Cron: "5 * * * *", Timezone: "UTC",
			Metrics: []RoutineMetric{{Name: "avg_balance_active_last_hour", Window: 3 * time.Hour, HistoryDays: 21}}},
	}
}
