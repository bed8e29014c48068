package routines

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dataworkers/dw/internal/store"
)

// claim takes the run of a routine for a tick: it marks runs whose
// watcher's lease ran out as lost, refuses while another run of the
// routine is alive (never two at once, across watchers too), and inserts
// the (routine, tick) row, which only one watcher can do. wall is the
// real time the lease is measured in.
func claim(ctx context.Context, db *store.DB, routine string, tick time.Time, watcher string, missed int,
	started time.Time, wall time.Time, lease time.Duration) (id int64, busy string, err error) {
	err = db.InTx(ctx, func(tx *store.Tx) error {
		id, busy = 0, ""
		if _, err := tx.ExecContext(ctx, `UPDATE routine_runs SET status = ?, finished_ms = ?, error = ?
			WHERE routine = ? AND status = ? AND lease_ms < ?`,
			string(StatusLost), store.Millis(started), "the watcher running it stopped renewing its lease (killed or cut off); the next tick ran instead",
			routine, string(StatusRunning), store.Millis(wall)); err != nil {
			return fmt.Errorf("expire routine leases: %w", err)
		}
		var other sql.NullString
		if err := tx.QueryRowContext(ctx, `SELECT MAX(watcher) FROM routine_runs WHERE routine = ? AND status = ?`,
			routine, string(StatusRunning)).Scan(&other); err != nil {
			return err
		}
		if other.Valid {
			busy = "a run of " + routine + " is still in progress on " + other.String
			return nil
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO routine_runs (routine, tick_ms, watcher, status, lease_ms, missed,
			started_ms, finished_ms, summary, error, findings, incidents, notified, proposals)
			VALUES (?, ?, ?, ?, ?, ?, ?, 0, '', '', '[]', '[]', '[]', '[]') ON CONFLICT (routine, tick_ms) DO NOTHING`,
			routine, store.Millis(tick), watcher, string(StatusRunning), store.Millis(wall.Add(lease)), missed, store.Millis(started))
		if err != nil {
			return fmt.Errorf("claim routine run: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			busy = "the tick was already run"
			return nil
		}
		return tx.QueryRowContext(ctx, `SELECT id FROM routine_runs WHERE routine = ? AND tick_ms = ?`, routine, store.Millis(tick)).Scan(&id)
	})
	return id, busy, err
}

// errLeaseLost says another watcher declared this run lost.
var errLeaseLost = errors.New("the run's lease was lost (another watcher marked it lost)")

// renew extends a running run's lease.
func renew(ctx context.Context, db *store.DB, id int64, watcher string, until time.Time) error {
	res, err := db.ExecContext(ctx, `UPDATE routine_runs SET lease_ms = ? WHERE id = ? AND watcher = ? AND status = ?`,
		store.Millis(until), id, watcher, string(StatusRunning))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errLeaseLost
	}
	return nil
}

// finish records how a run ended. Only the watcher holding the run may.
func finish(ctx context.Context, db *store.DB, r *Run) error {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	res, err := db.ExecContext(ctx, `UPDATE routine_runs SET status = ?, finished_ms = ?, summary = ?, error = ?,
		findings = ?, incidents = ?, notified = ?, proposals = ? WHERE id = ? AND watcher = ? AND status = ?`,
		string(r.Status), store.Millis(r.Finished), r.Summary, r.Error, enc(r.Findings), enc(r.Incidents), enc(r.Notified), enc(r.Proposals),
		r.ID, r.Watcher, string(StatusRunning))
	if err != nil {
		return fmt.Errorf("record routine run: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errLeaseLost
	}
	return nil
}

// lastTicks is the latest tick recorded for each routine.
func lastTicks(ctx context.Context, q store.Querier) (map[string]time.Time, error) {
	rows, err := q.QueryContext(ctx, `SELECT routine, MAX(tick_ms) FROM routine_runs GROUP BY routine`)
	if err != nil {
		return nil, fmt.Errorf("read routine runs: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var name string
		var ms int64
		if err := rows.Scan(&name, &ms); err != nil {
			return nil, err
		}
		out[name] = store.FromMillis(ms)
	}
	return out, rows.Err()
}

// claimNotice reserves the first message about an incident to a person.
// It returns the earlier message's channel and ts when one exists (the
// new message is threaded under it), or first=true when this call made
// the reservation and must post the incident's first message.
func claimNotice(ctx context.Context, db *store.DB, incident, person, via string, now time.Time) (first bool, channel, ts, prevVia string, err error) {
	err = db.InTx(ctx, func(tx *store.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO routine_notices (incident_id, person, via, channel, ts, created_ms)
			VALUES (?, ?, ?, '', '', ?) ON CONFLICT (incident_id, person) DO NOTHING`, incident, person, via, store.Millis(now))
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			first = true
			return nil
		}
		first = false
		return tx.QueryRowContext(ctx, `SELECT channel, ts, via FROM routine_notices WHERE incident_id = ? AND person = ?`,
			incident, person).Scan(&channel, &ts, &prevVia)
	})
	return first, channel, ts, prevVia, err
}

// noticeRoot reads where an incident's first message went, once posted.
func noticeRoot(ctx context.Context, db *store.DB, incident, person string) (channel, ts string, err error) {
	err = db.QueryRowContext(ctx, `SELECT channel, ts FROM routine_notices WHERE incident_id = ? AND person = ?`,
		incident, person).Scan(&channel, &ts)
	return channel, ts, err
}

// noticePosted records where the incident's first message went.
func noticePosted(ctx context.Context, db *store.DB, incident, person, channel, ts, via string) error {
	_, err := db.ExecContext(ctx, `UPDATE routine_notices SET channel = ?, ts = ?, via = ? WHERE incident_id = ? AND person = ?`,
		channel, ts, via, incident, person)
	return err
}

// releaseNotice drops a reservation whose post failed, so the next run
// posts the first message again.
func releaseNotice(ctx context.Context, db *store.DB, incident, person string) error {
	_, err := db.ExecContext(ctx, `DELETE FROM routine_notices WHERE incident_id = ? AND person = ? AND ts = ''`, incident, person)
	return err
}
