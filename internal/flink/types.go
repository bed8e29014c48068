package flink

// The @class values Flink writes on checkpoint statistics to say which kind
// an entry is.
const (
	ClassCompleted  = "completed"
	ClassFailed     = "failed"
	ClassInProgress = "in_progress"
)

// Checkpoint statuses and types.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
	StatusFailed     = "FAILED"

	TypeCheckpoint          = "CHECKPOINT"
	TypeUnalignedCheckpoint = "UNALIGNED_CHECKPOINT"
	TypeSavepoint           = "SAVEPOINT"
	TypeSyncSavepoint       = "SYNC_SAVEPOINT"
)

// CheckpointingStatistics is the body of GET /jobs/{jobid}/checkpoints.
type CheckpointingStatistics struct {
	Counts  Counts                 `json:"counts"`
	Summary Summary                `json:"summary"`
	Latest  LatestCheckpoints      `json:"latest"`
	History []CheckpointStatistics `json:"history"`
}

// Counts counts checkpoints by outcome; Restored is how many times the job
// was restored.
type Counts struct {
	Restored   int64 `json:"restored"`
	Total      int64 `json:"total"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

// StatsSummaryDto summarises one measure over completed checkpoints.
type StatsSummaryDto struct {
	Min  int64   `json:"min"`
	Max  int64   `json:"max"`
	Avg  int64   `json:"avg"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
}

// Summary holds the summaries of completed checkpoints.
type Summary struct {
	CheckpointedSize  StatsSummaryDto `json:"checkpointed_size"`
	StateSize         StatsSummaryDto `json:"state_size"`
	EndToEndDuration  StatsSummaryDto `json:"end_to_end_duration"`
	AlignmentBuffered StatsSummaryDto `json:"alignment_buffered"`
	ProcessedData     StatsSummaryDto `json:"processed_data"`
	PersistedData     StatsSummaryDto `json:"persisted_data"`
}

// LatestCheckpoints holds the latest of each kind; a kind that never
// happened is null.
type LatestCheckpoints struct {
	Completed *CheckpointStatistics         `json:"completed"`
	Savepoint *CheckpointStatistics         `json:"savepoint"`
	Failed    *CheckpointStatistics         `json:"failed"`
	Restored  *RestoredCheckpointStatistics `json:"restored"`
}

// RestoredCheckpointStatistics is the checkpoint or savepoint the job was
// last restored from.
type RestoredCheckpointStatistics struct {
	ID               int64  `json:"id"`
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

// TaskCheckpointStatistics is one vertex's share of a checkpoint.
type TaskCheckpointStatistics struct {
	ID                      int64  `json:"id"`
	Status                  string `json:"status"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
}

// CheckpointStatistics is one checkpoint. Class ("@class" on the wire) says
// which kind it is; the kind-specific fields are nil on the other kinds:
// ExternalPath and Discarded on completed ones, FailureTimestamp and
// FailureMessage on failed ones. SavepointFormat is null unless it is a
// savepoint.
type CheckpointStatistics struct {
	Class                   string                              `json:"@class"`
	ID                      int64                               `json:"id"`
	Status                  string                              `json:"status"`
	IsSavepoint             bool                                `json:"is_savepoint"`
	SavepointFormat         *string                             `json:"savepointFormat"`
	TriggerTimestamp        int64                               `json:"trigger_timestamp"`
	LatestAckTimestamp      int64                               `json:"latest_ack_timestamp"`
	CheckpointedSize        int64                               `json:"checkpointed_size"`
	StateSize               int64                               `json:"state_size"`
	EndToEndDuration        int64                               `json:"end_to_end_duration"`
	AlignmentBuffered       int64                               `json:"alignment_buffered"`
	ProcessedData           int64                               `json:"processed_data"`
	PersistedData           int64                               `json:"persisted_data"`
	NumSubtasks             int                                 `json:"num_subtasks"`
	NumAcknowledgedSubtasks int                                 `json:"num_acknowledged_subtasks"`
	CheckpointType          string                              `json:"checkpoint_type"`
	Tasks                   map[string]TaskCheckpointStatistics `json:"tasks"`

	ExternalPath     *string `json:"external_path,omitempty"`
	Discarded        *bool   `json:"discarded,omitempty"`
	FailureTimestamp *int64  `json:"failure_timestamp,omitempty"`
	FailureMessage   *string `json:"failure_message,omitempty"`
}

// JobExceptionsInfoWithHistory is the body of GET /jobs/{jobid}/exceptions.
type JobExceptionsInfoWithHistory struct {
	ExceptionHistory JobExceptionHistory `json:"exceptionHistory"`
}

// JobExceptionHistory lists the job's root failures, newest first;
// Truncated says more exist than were returned.
type JobExceptionHistory struct {
	Entries   []RootExceptionInfo `json:"entries"`
	Truncated bool                `json:"truncated"`
}

// ExceptionInfo is one failure. TaskName, Endpoint and TaskManagerID are
// empty for a failure of the job as a whole.
type ExceptionInfo struct {
	ExceptionName string            `json:"exceptionName"`
	Stacktrace    string            `json:"stacktrace"`
	Timestamp     int64             `json:"timestamp"`
	FailureLabels map[string]string `json:"failureLabels"`
	TaskName      string            `json:"taskName,omitempty"`
	Endpoint      string            `json:"endpoint,omitempty"`
	TaskManagerID string            `json:"taskManagerId,omitempty"`
}

// RootExceptionInfo is a failure that caused a restart, with the failures
// that happened alongside it.
type RootExceptionInfo struct {
	ExceptionInfo
	ConcurrentExceptions []ExceptionInfo `json:"concurrentExceptions"`
}
