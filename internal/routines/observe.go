package routines

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/incidents"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/warehouse"
)

// observation gathers what one run saw, which incidents its symptoms went
// to and who was told.
type observation struct {
	findings  []Finding
	incidents []Incident
	notified  []Notified
	proposals []Proposal
	errs      []string
	timedOut  bool
	// seen are the details reported per incident in this run, for the
	// owner's message.
	seen map[string][]string
}

func (o *observation) fail(kind, target string, err error) {
	o.findings = append(o.findings, Finding{Kind: kind, Target: target, Status: "error", Detail: err.Error()})
	o.errs = append(o.errs, fmt.Sprintf("%s %s: %v", kind, target, err))
	if errors.Is(err, context.DeadlineExceeded) {
		o.timedOut = true
	}
}

// reported files the incidents a report went to under the asset whose
// owner hears about them.
func (o *observation) reported(refs []incidents.IncidentRef, asset string, details []string) {
	for _, ref := range refs {
		known := false
		for i := range o.incidents {
			if o.incidents[i].ID == ref.ID {
				known = true
				o.incidents[i].Status = string(ref.Status)
				o.incidents[i].Opened = o.incidents[i].Opened || ref.Opened
			}
		}
		if !known {
			o.incidents = append(o.incidents, Incident{ID: ref.ID, Opened: ref.Opened, Status: string(ref.Status), Asset: asset, Reason: ref.Reason})
		}
		o.seen[ref.ID] = append(o.seen[ref.ID], details...)
	}
}

// observe runs every observation of a routine, then tells the owners of
// the incidents it opened or joined. One failing observation does not
// keep the others from running.
func (r *Runner) observe(ctx context.Context, rc config.Routine) *observation {
	o := &observation{findings: []Finding{}, incidents: []Incident{}, notified: []Notified{}, proposals: []Proposal{}, seen: map[string][]string{}}
	svc := r.incidents()
	for _, ch := range rc.Checks {
		if ctx.Err() != nil {
			break
		}
		r.observeCheck(ctx, rc.Name, svc, ch, o)
	}
	for _, m := range rc.Metrics {
		if ctx.Err() != nil {
			break
		}
		r.observeMetric(ctx, svc, m, o)
	}
	if ctx.Err() == nil {
		r.observeStreams(ctx, svc, rc, o)
	}
	if ctx.Err() != nil && len(o.errs) == 0 {
		o.errs = append(o.errs, ctx.Err().Error())
		o.timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
	}
	// The owners hear even when the run was cut short: what was reported
	// is already on the incident.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if ctx.Err() == nil {
		r.propose(tctx, o)
	}
	r.tell(tctx, rc.Name, o)
	return o
}

func (r *Runner) incidents() *incidents.Service {
	return &incidents.Service{DB: r.o.DB, Clock: r.o.Clock, Graph: incidents.LineageGraph(r.graph, lineage.NamesFromConfig(r.o.Config)), OpenWarehouse: r.o.Warehouse}
}

func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// tablesFor expands a table glob against the warehouse's catalog.
func tablesFor(ctx context.Context, w warehouse.Warehouse, pattern string) ([]string, error) {
	if !hasGlob(pattern) {
		return []string{pattern}, nil
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("table glob %q is malformed: %v", pattern, err)
	}
	refs, err := w.ListTables(ctx)
	if err != nil {
		return nil, err
	}
	pat := strings.ToLower(pattern)
	var out []string
	for _, t := range refs {
		name := strings.ToLower(t.Schema + "." + t.Name)
		full := strings.ToLower(t.Database + "." + name)
		if ok, _ := path.Match(pat, name); ok {
			out = append(out, t.Schema+"."+t.Name)
		} else if ok, _ := path.Match(pat, full); ok && t.Database != "" {
			out = append(out, t.Database+"."+t.Schema+"."+t.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no table in warehouse %s matches %q", w.Name(), pattern)
	}
	return out, nil
}

// midnight is the start of t's UTC day: history is recorded in whole days.
func midnight(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

// historyKey marks that a routine recorded a series' history, so the
// backfill runs once per table (or metric) whichever routine does it.
func historyKey(parts ...string) string { return "routines.history." + strings.Join(parts, "\x1f") }

func (r *Runner) historyRecorded(ctx context.Context, key string) (bool, error) {
	_, _, ok, err := store.GetSetting(ctx, r.o.DB, key)
	return ok, err
}

func (r *Runner) observeCheck(ctx context.Context, routine string, svc *incidents.Service, ch config.RoutineCheck, o *observation) {
	w, err := r.openWarehouse(ctx, ch.Warehouse)
	if err != nil {
		o.fail("check", ch.Table, err)
		return
	}
	tables, err := tablesFor(ctx, w, ch.Table)
	if err != nil {
		o.fail("check", ch.Table, err)
		return
	}
	env := checks.Env{DB: r.o.DB, Warehouse: w, Clock: r.o.Clock, Agent: "dw-watch", Tool: "routine:" + routine}
	for _, table := range tables {
		if ctx.Err() != nil {
			return
		}
		now := r.o.Clock.Now()
		if ch.HistoryDays > 0 {
			bucket := ch.Bucket
			if bucket == "" {
				bucket = "hour"
			}
			key := historyKey("check", w.Name(), table, bucket)
			done, err := r.historyRecorded(ctx, key)
			if err != nil {
				o.fail("check", table, err)
				continue
			}
			if !done {
				day := midnight(now)
				r.o.Log.Info("first check of this table: recording its history before judging", "table", table, "days", ch.HistoryDays)
				if _, err := svc.RunCheck(ctx, env, checks.CheckRequest{Table: table, Bucket: bucket,
					Since: day.AddDate(0, 0, -ch.HistoryDays).Format(time.RFC3339), Until: day.Format(time.RFC3339)},
					incidents.CheckRunParams{NoIncident: true}); err != nil {
					o.fail("check", table, fmt.Errorf("record history: %w", err))
					continue
				}
				if err := store.PutSetting(ctx, r.o.DB, key, now.Format(time.RFC3339), now); err != nil {
					o.fail("check", table, err)
					continue
				}
			}
		}
		run, err := svc.RunCheck(ctx, env, checks.CheckRequest{Table: table, Period: ch.Period, Bucket: ch.Bucket},
			incidents.CheckRunParams{Actor: "dw watch (" + routine + ")", Names: r.graph})
		if err != nil {
			o.fail("check", table, err)
			continue
		}
		rep := run.Report
		f := Finding{Kind: "check", Target: rep.Table, Asset: run.Asset, Status: "ok", Detail: rep.Summary}
		if rep.Status == checks.NotJudged || rep.Status == checks.Learning {
			f.Status = "learning"
		}
		if len(run.Symptoms) > 0 {
			f.Status = "problem"
			o.reported(run.Incidents, run.Asset, symptomLines(run.Symptoms))
		}
		o.findings = append(o.findings, f)
	}
}

func (r *Runner) observeMetric(ctx context.Context, svc *incidents.Service, m config.RoutineMetric, o *observation) {
	def, err := svc.GetMetric(ctx, m.Name)
	if err != nil {
		o.fail("metric", m.Name, err)
		return
	}
	if def.Source != incidents.SourceSQL {
		o.fail("metric", m.Name, fmt.Errorf("metric %s is pushed (its values come through monitor_metrics); a routine can only compute metrics defined with SQL", m.Name))
		return
	}
	now := r.o.Clock.Now()
	if m.HistoryDays > 0 {
		key := historyKey("metric", def.Name)
		done, err := r.historyRecorded(ctx, key)
		if err != nil {
			o.fail("metric", m.Name, err)
			return
		}
		if !done {
			day := midnight(now)
			r.o.Log.Info("first run of this metric: recording its history before judging", "metric", m.Name, "days", m.HistoryDays)
			if _, err := svc.MonitorMetric(ctx, incidents.MonitorParams{Metric: def.Name, Backfill: true,
				Window: &incidents.Window{Start: day.AddDate(0, 0, -m.HistoryDays), End: day}}); err != nil {
				o.fail("metric", m.Name, fmt.Errorf("record history: %w", err))
				return
			}
			if err := store.PutSetting(ctx, r.o.DB, key, now.Format(time.RFC3339), now); err != nil {
				o.fail("metric", m.Name, err)
				return
			}
		}
	}
	p := incidents.MonitorParams{Metric: def.Name}
	if m.Window > 0 {
		step := time.Hour
		if def.Grain == "day" {
			step = 24 * time.Hour
		}
		end := now.Truncate(step)
		p.Window = &incidents.Window{Start: end.Add(-m.Window), End: end}
	}
	res, err := svc.MonitorMetric(ctx, p)
	if err != nil {
		o.fail("metric", m.Name, err)
		return
	}
	f := Finding{Kind: "metric", Target: def.Name, Asset: def.Asset, Status: "ok", Detail: res.Summary}
	if len(res.Anomalies) > 0 {
		f.Status = "problem"
		o.reported(res.Incidents, def.Asset, symptomLines(res.Anomalies))
	}
	o.findings = append(o.findings, f)
}

func (r *Runner) openWarehouse(ctx context.Context, name string) (warehouse.Warehouse, error) {
	if r.o.Warehouse == nil {
		return nil, errors.New("no warehouse can be opened by this watcher")
	}
	return r.o.Warehouse(ctx, name)
}

// symptomLines are the symptoms in words, for the owner's message.
func symptomLines(syms []incidents.Symptom) []string {
	out := make([]string, 0, len(syms))
	for _, s := range syms {
		line := s.Detail
		if line == "" {
			line = fmt.Sprintf("%s on %s: observed %g, expected about %g", s.Kind, s.Asset, s.Observed, s.Expected)
		}
		out = append(out, line)
	}
	return out
}
