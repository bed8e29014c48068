package routines

import (
	"context"
	"time"

	"github.com/dataworkers/dw/internal/checks"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
)

// RecordDemoHistory records, once, the history the embedded default's
// routines would record on their first run (each check's history_days of
// hourly values before the clock's day), without judging today. `dw demo
// seed` runs it, so a newcomer's first "check usage.usage_hourly for today"
// is judged against three weeks of history rather than "not judged". The
// marker is the routines' own, so `dw watch` does not record it again.
func RecordDemoHistory(ctx context.Context, env checks.Env) error {
	now := env.Clock.Now()
	for _, rt := range config.DemoRoutines() {
		for _, ch := range rt.Checks {
			if ch.HistoryDays <= 0 || hasGlob(ch.Table) {
				continue
			}
			bucket := ch.Bucket
			if bucket == "" {
				bucket = "hour"
			}
			key := historyKey("check", env.Warehouse.Name(), ch.Table, bucket)
			if _, _, ok, err := store.GetSetting(ctx, env.DB, key); err != nil || ok {
				if err != nil {
					return err
				}
				continue
			}
			day := midnight(now)
			if _, err := checks.RunCheck(ctx, env, checks.CheckRequest{Table: ch.Table, Bucket: bucket,
				Since: day.AddDate(0, 0, -ch.HistoryDays).Format(time.RFC3339), Until: day.Format(time.RFC3339)}); err != nil {
				return err
			}
			if err := store.PutSetting(ctx, env.DB, key, now.Format(time.RFC3339), now); err != nil {
				return err
			}
		}
	}
	return nil
}
