package lineage

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parseSchedule checks a schedule and returns its cron schedule and zone.
// Only standard 5-field expressions and the @descriptors are accepted:
// orchestrators (Airflow, dbt Cloud, Hightouch) speak that dialect, and a
// seconds field would be read differently by each of them.
func parseSchedule(s Schedule) (cron.Schedule, *time.Location, error) {
	spec := strings.TrimSpace(s.Cron)
	if spec == "" {
		return nil, nil, fmt.Errorf("schedule: cron expression is empty")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, nil, fmt.Errorf("schedule %q: give the time zone in the timezone field, not in the expression", spec)
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("schedule %q is not a 5-field cron expression (minute hour day-of-month month day-of-week, e.g. \"0 23 * * *\") or @hourly/@daily/@weekly/@monthly: %w", spec, err)
	}
	loc := time.UTC
	if tz := strings.TrimSpace(s.Timezone); tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, nil, fmt.Errorf("schedule time zone %q is not an IANA zone name (e.g. UTC, Europe/Berlin, America/New_York): %w", tz, err)
		}
		loc = l
	}
	return sched, loc, nil
}

// ValidateSchedule reports whether a schedule can be read.
func ValidateSchedule(s Schedule) error {
	_, _, err := parseSchedule(s)
	return err
}

// NextRun is the first time the schedule fires strictly after now, in UTC.
func (s Schedule) NextRun(now time.Time) (time.Time, error) {
	sched, loc, err := parseSchedule(s)
	if err != nil {
		return time.Time{}, err
	}
	next := sched.Next(now.In(loc))
	if next.IsZero() {
		return time.Time{}, fmt.Errorf("schedule %q never fires", s.Cron)
	}
	return next.UTC(), nil
}
