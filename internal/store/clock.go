package store

import "time"

// nowMillis is the wall clock for bookkeeping columns (migration times).
// Domain code takes an injectable clock instead; see package clock.
func nowMillis() int64 { return time.Now().UnixMilli() }
