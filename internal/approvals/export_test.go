package approvals

// The fixtures, for the external tests that drive approvals through the
// MCP adapter (which imports approvals, so it cannot be tested from inside).
var (
	Fixture     = fixture
	MustPropose = mustPropose
	HoldDAG     = holdDAG
)
