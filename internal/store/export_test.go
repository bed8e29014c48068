package store

import "time"

// SetCommitGrace sets commitGrace for a test and returns the undo.
func SetCommitGrace(d time.Duration) (undo func()) {
	old := commitGrace
	commitGrace = d
	return func() { commitGrace = old }
}
