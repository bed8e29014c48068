package routines

import "github.com/dataworkers/dw/internal/routines/runlog"

// The record of runs lives in package runlog, which agents read without
// linking the runner; these names keep the runner's code short.
type (
	// Run is one recorded run of a routine.
	Run = runlog.Run
	// Finding is what one observation of a run saw.
	Finding = runlog.Finding
	// Incident is an incident a run opened or joined.
	Incident = runlog.Incident
	// Notified is one person told about one incident.
	Notified = runlog.Notified
	// Proposal is a hold a run drafted, or why it did not.
	Proposal = runlog.Proposal
	// Status is how a run ended.
	Status = runlog.Status
	// ListParams selects recorded runs, a page at a time.
	ListParams = runlog.ListParams
)

// Run statuses.
const (
	StatusRunning  = runlog.StatusRunning
	StatusOK       = runlog.StatusOK
	StatusFlagged  = runlog.StatusFlagged
	StatusFailed   = runlog.StatusFailed
	StatusCanceled = runlog.StatusCanceled
	StatusLost     = runlog.StatusLost
)

// Readers of the record, re-exported for callers that hold a runner.
var (
	List        = runlog.List
	GetRun      = runlog.GetRun
	ParseStatus = runlog.ParseStatus
)
