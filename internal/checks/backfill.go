package checks

import (
	"context"
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/baseline"
	"github.com/dataworkers/dw/internal/warehouse"
)

// A backfill is a bucketed check over a long window (weeks of hours, the
// history a table's first check asks for). As one statement it is one
// scan of the whole window that must finish inside one statement timeout,
// reports nothing until it ends and keeps nothing when it is cut off. So
// it runs in chunks of whole buckets, one statement each, each chunk's
// buckets judged and recorded as they arrive: a cancelled or timed-out
// backfill keeps what it did, and a re-run skips chunks an earlier run
// recorded recently (recording is idempotent per bucket either way).

// ChunkSpan is one chunk of a backfill: three days of hours (72 buckets)
// or a month of days. Three days of a 10M-row, 28-day table are about
// 1.1M rows. Each statement has a cost of its own on top of its rows: on
// that table, 21 days by hour as a statement a day took 1.24-1.41x one
// scan of the window through MCP, as a statement per three days
// 1.19-1.24x (alternating runs), for 80-90 MiB more at the peak.
func ChunkSpan(g Grain) time.Duration {
	if g == Day {
		return 31 * 24 * time.Hour
	}
	return 72 * time.Hour
}

// backfillAfter is the longest window checked as one statement: two days
// of hours, two months of days. It is not tied to ChunkSpan, so a window
// of a few days still reports its progress and keeps what it did.
func backfillAfter(g Grain) time.Duration {
	if g == Day {
		return 62 * 24 * time.Hour
	}
	return 48 * time.Hour
}

func chunkText(g Grain) string {
	return fmt.Sprintf("%d %s buckets", ChunkSpan(g)/g.Duration(), g)
}

// resumeWithin is how recent an earlier run's points must be for a re-run
// to trust them rather than scan their chunk again: rows land late, so an
// old point may no longer be the bucket's value.
const resumeWithin = 6 * time.Hour

// backfillChunks returns the validated window and its chunks when the
// window is long enough to be a backfill (longer than backfillAfter),
// else nil.
func backfillChunks(t *warehouse.Table, d warehouse.Dialect, w Window) (Window, []Window) {
	if w.IsZero() || w.Grain == Whole {
		return w, nil
	}
	v, err := validateWindow(t, d, w)
	if err != nil {
		return w, nil // Plan reports it
	}
	if v.End.Sub(v.Start) <= backfillAfter(v.Grain) {
		return w, nil
	}
	span := ChunkSpan(v.Grain)
	// Chunks of hours end on UTC midnights, so each whole day of the
	// window lies in one chunk and adds up from that chunk's hours alone
	// (daySamples): a backfill stopped after a chunk has recorded every
	// day the chunk finished, and a re-run that skips the chunk loses none.
	end := v.Start.Add(span)
	if v.Grain == Hour {
		end = v.Start.Truncate(24 * time.Hour).Add(span)
	}
	var out []Window
	for s := v.Start; s.Before(v.End); s, end = end, end.Add(span) {
		c := v
		c.Start, c.End = s, end
		if c.End.After(v.End) {
			c.End = v.End
		}
		out = append(out, c)
	}
	return v, out
}

// windowOnly reports whether a check's window value must be computed over
// the whole window by a statement of its own, because the buckets cannot
// give it and an explicit expectation judges it:
//   - a declared key must be unique across the window: a key repeated in
//     two hours is a duplicate that no bucket's COUNT - COUNT(DISTINCT)
//     sees, so its exact distinct count runs once over the window;
//   - a relationships check is an anti-join against another table, run
//     once for the window as it is without chunks.
//
// An inferred key is judged against its own history only, bucket by
// bucket (each bucket's duplicates within it, exact), so it needs no
// window-wide distinct count: that count was the most expensive
// aggregate of the single-statement backfill.
func windowOnly(s Spec) bool {
	return (s.Kind == KindUniqueness && !s.Inferred) || s.Kind == KindRelationship
}

func runBackfill(ctx context.Context, env Env, table *warehouse.Table, specs []Spec, w Window, cws []Window, now time.Time) (*Report, error) {
	wh, d := env.Warehouse, env.Warehouse.Dialect()
	full, err := plan(table, d, specs, w, true)
	if err != nil {
		return nil, err
	}
	var winSpecs []Spec
	for _, s := range specs {
		if windowOnly(s) {
			winSpecs = append(winSpecs, s)
		}
	}
	ev, err := newEvaluator(ctx, env.DB, full, now)
	if err != nil {
		return nil, err
	}
	done, err := recordedChunks(ctx, env, full, cws, now)
	if err != nil {
		return nil, err
	}
	opts := RunOptions{Agent: env.Agent, Tool: env.Tool, Clock: fixedClock{now}, Timeout: env.Timeout}
	// Steps: the plan (reported at once, so a client's progress is ruled
	// by these reports from the start rather than by the elapsed-seconds
	// heartbeat, whose values later reports would have to exceed), each
	// chunk, and the window-wide statement when there is one.
	steps := len(cws) + 1
	if len(winSpecs) > 0 {
		steps++
	}
	progress := func(n int, msg string) {
		if env.Progress != nil {
			env.Progress(n, steps, msg)
		}
	}
	progress(1, fmt.Sprintf("backfill of %s planned: %d chunks of %s", table.Ref, len(cws), chunkText(w.Grain)))
	total := make([]any, len(full.aggs))
	var all []judged
	statements, skipped := 0, 0
	var bytes int64
	for i, cw := range cws {
		stopped := func(err error) error {
			return fmt.Errorf("backfill of %s stopped at %s after %d of %d chunks; the buckets before it are recorded, and running the same check again continues from there: %w",
				table.Ref, cw.Start.Format(time.RFC3339), i, len(cws), err)
		}
		if err := ctx.Err(); err != nil {
			return nil, stopped(err)
		}
		if done[i] {
			skipped++
			progress(i+2, fmt.Sprintf("%s to %s already recorded (chunk %d of %d)", cw.Start.Format(time.RFC3339), cw.End.Format(time.RFC3339), i+1, len(cws)))
			continue
		}
		cp, err := plan(table, d, specs, cw, true)
		if err != nil {
			return nil, err
		}
		scan, err := Run(ctx, wh, cp, opts)
		if err != nil {
			return nil, stopped(err)
		}
		var obs []Observation
		for _, o := range scan.Observations {
			if !o.Total {
				obs = append(obs, o)
			}
		}
		// The chunk's days are recorded with its hours, in one
		// transaction: a chunk a re-run skips has both.
		days, err := daySamples(full, cw, scan, now)
		if err != nil {
			return nil, stopped(err)
		}
		js, err := ev.judge(ctx, obs, days...)
		if err != nil {
			return nil, stopped(err)
		}
		all = append(all, js...)
		combineInto(full, total, scan.total)
		statements += len(cp.Statements)
		bytes += scan.BytesScanned
		progress(i+2, fmt.Sprintf("%s to %s recorded (chunk %d of %d)", cw.Start.Format(time.RFC3339), cw.End.Format(time.RFC3339), i+1, len(cws)))
	}
	var obs []Observation
	if len(winSpecs) > 0 {
		whole := w
		whole.Grain = Whole
		wp, err := Plan(table, d, winSpecs, whole)
		if err != nil {
			return nil, err
		}
		scan, err := Run(ctx, wh, wp, opts)
		if err != nil {
			return nil, fmt.Errorf("backfill of %s: every bucket is recorded, but the window-wide check failed: %w", table.Ref, err)
		}
		statements += len(wp.Statements)
		bytes += scan.BytesScanned
		for _, o := range scan.Observations {
			o.Check = checkIndex(full, wp.Checks[o.Check].Label)
			obs = append(obs, o)
		}
		progress(steps, "window-wide checks done")
	}
	var notes []string
	if skipped == 0 {
		// The window's counts, sums and newest time add up from the
		// chunks; its medians, p95s and text profiles do not and are
		// left to the buckets (a 4-week median is nobody's baseline).
		o, err := summedObservations(full, total, now)
		if err != nil {
			return nil, err
		}
		obs = append(obs, o...)
	} else {
		notes = append(notes, fmt.Sprintf("resumed: %d of %d chunks were recorded by an earlier run in the last %s and not scanned again; this report judges the rest, and window-wide values other than the declared key's and relationships' are left out",
			skipped, len(cws), resumeWithin))
	}
	js, err := ev.judge(ctx, obs)
	if err != nil {
		return nil, err
	}
	all = append(all, js...)
	rep := ev.report(all, statements, bytes)
	rep.Inferred = append(notes, fmt.Sprintf("backfill in %d chunks of %s, one statement each, each recorded as it finished", len(cws), chunkText(w.Grain)))
	return rep, nil
}

// daySamples is each whole calendar day (UTC) of a chunk of hours, once
// it is over, as that day's points: the window values a check of "today"
// or "yesterday" records for its window. Without them a table's first
// backfill gives every hour a history but its days none, and the next
// day's check has "0 earlier points" for each whole-day value. A day adds
// up from its 24 hours in the chunk's scan (backfillChunks keeps a day in
// one chunk). Only values that add up from hours are recorded (counts,
// rates and sums; medians, percentiles and text profiles need a ROLLUP the
// chunks leave out, and stay judged by the hour); a check judged over the
// whole window (windowOnly) has no day of its own in the chunks, and
// staleness is a moment's value, not a day's.
func daySamples(p *ScanPlan, cw Window, scan *Scan, now time.Time) ([]baseline.Sample, error) {
	if cw.Grain != Hour {
		return nil, nil
	}
	const day = 24 * time.Hour
	var out []baseline.Sample
	for d := cw.Start.Truncate(day); !d.Add(day).After(cw.End) && !d.Add(day).After(now); d = d.Add(day) {
		if d.Before(cw.Start) {
			continue // the part of a day before the window
		}
		hours := make(map[int64][]any, 24)
		for h := d; h.Before(d.Add(day)); h = h.Add(time.Hour) {
			if r := scan.rows[h.UnixMilli()]; r != nil {
				hours[h.UnixMilli()] = r
			}
		}
		row := make([]any, len(p.aggs))
		combineBuckets(p, hours, row)
		obs, err := summedObservations(p, row, now)
		if err != nil {
			return nil, err
		}
		for _, o := range obs {
			if o.Metric == MetricStaleness || (o.Metric == MetricRowCount && p.rewritten) {
				continue
			}
			out = append(out, baseline.Sample{
				Series: baseline.Series{Asset: p.Asset, Metric: o.Metric, Dimension: o.Dimension, Grain: grainLabel(day)},
				Point:  baseline.Point{At: d, Value: o.Value}})
		}
	}
	return out, nil
}

// summedObservations is every check's window values from a row added up
// from buckets, but for the checks judged over the whole window by a
// statement of their own (windowOnly), which no bucket row holds.
func summedObservations(p *ScanPlan, row []any, now time.Time) ([]Observation, error) {
	var out []Observation
	for ci, pc := range p.Checks {
		if windowOnly(pc.Spec) {
			continue
		}
		obs, err := observe(p, ci, row, time.Time{}, true, now)
		if err != nil {
			return nil, err
		}
		out = append(out, obs...)
	}
	return out, nil
}

// combineInto adds one chunk's window row into the backfill's: counts and
// sums add, the newest time is the latest; what does not combine stays nil.
func combineInto(p *ScanPlan, total, chunk []any) {
	for a, agg := range p.aggs {
		v := chunk[a]
		if v == nil {
			continue
		}
		switch agg.combine {
		case combineSum:
			f, ok := toFloat(v)
			if !ok {
				continue
			}
			if prev, ok := toFloat(total[a]); ok {
				f += prev
			}
			total[a] = f
		case combineMax:
			if total[a] == nil || later(v, total[a]) {
				total[a] = v
			}
		}
	}
}

func checkIndex(p *ScanPlan, label string) int {
	for i, pc := range p.Checks {
		if pc.Label == label {
			return i
		}
	}
	return 0
}

// recordedChunks marks the chunks whose every ended bucket has a row count
// recorded within resumeWithin: an earlier run of the backfill did them.
// Without a row count check (or on a table of latest changes, whose
// volumes are not recorded) nothing is resumed.
func recordedChunks(ctx context.Context, env Env, p *ScanPlan, cws []Window, now time.Time) (map[int]bool, error) {
	out := map[int]bool{}
	if p.rewritten {
		return out, nil
	}
	has := false
	for _, pc := range p.Checks {
		has = has || pc.Spec.Kind == KindRowCount
	}
	if !has {
		return out, nil
	}
	s := baseline.Series{Asset: p.Asset, Metric: MetricRowCount, Grain: string(p.Window.Grain)}
	got, err := baseline.Recorded(ctx, env.DB, s, p.Window.Start, p.Window.End, now.Add(-resumeWithin))
	if err != nil {
		return nil, err
	}
	g := p.Window.Grain.Duration()
	for i, cw := range cws {
		if cw.End.After(now) {
			continue // still filling: always scanned again
		}
		all := true
		for b := cw.Start; b.Before(cw.End) && all; b = b.Add(g) {
			all = got[b]
		}
		out[i] = all
	}
	return out, nil
}
