package orchestrate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/rest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/suggest"
)

// Defaults for a Dispatcher.
const (
	// DefaultClaimLease outlasts the slowest trigger (two calls at the
	// longest timeout) by a wide margin; only a claim whose holder died
	// waits this long to be taken over.
	DefaultClaimLease   = 5 * time.Minute
	DefaultPollInterval = 5 * time.Second
	// MaxWait bounds how long one Poll call waits for a run to end: under
	// the 60 s request timeout of common MCP clients (a longer wait_seconds
	// is capped, and the answer says so).
	MaxWait = 50 * time.Second
)

// RunKinds are the proposal kinds an orchestrator run carries out; a
// hold, a schema version or a connector change is never done by starting
// a job.
var RunKinds = []string{approvals.KindRerun, approvals.KindBackfill, approvals.KindReplay}

// Approval says on what grounds a run is dispatched: an approved
// proposal, or (without one) a domain at L3 whose open classes include the
// kind. Its fields are the same on every trigger tool.
type Approval struct {
	ProposalID string `json:"proposal_id,omitempty" jsonschema:"approved proposal this run carries out (e.g. P-7K3M9QXA); its bound action must be exactly this run: system, target, location (instance, Dagster code location and repository, dbt Cloud account, AWS region), every param, and the target's domain"`
	Domain     string `json:"domain,omitempty" jsonschema:"without a proposal: the domain whose open class allows the run (autonomy L3); it must be the domain of the run's asset, which is the default"`
	Kind       string `json:"kind,omitempty" jsonschema:"rerun, backfill or replay; default: the proposal's kind, else rerun (only reruns run without a proposal)"`
	RequestKey string `json:"request_key,omitempty" jsonschema:"without a proposal: a name for this request (e.g. INC-12-egress-rerun) so that calling again finds the same run instead of starting another; default: the incident id"`
	IncidentID string `json:"incident_id,omitempty" jsonschema:"incident the run remedies; without a proposal, the run's steps go to this incident's receipt"`
}

// Params is one run to dispatch.
type Params struct {
	Approval
	System System         `json:"system" jsonschema:"dagster, airflow, dbt_cloud or step_functions"`
	Target string         `json:"target" jsonschema:"what to run: a Dagster location/repository/job, an Airflow DAG id, a dbt Cloud job id, a Step Functions state machine ARN"`
	Params map[string]any `json:"params,omitempty" jsonschema:"run parameters: dagster run_config and tags; airflow conf; dbt Cloud overrides (steps_override, git_branch, …); step_functions input"`
}

// Status words of a RunResult besides the run states.
const (
	// StatusNotStarted: the last trigger failed; calling again retries.
	StatusNotStarted = "not_started"
	// StatusDispatching: another call is triggering the run right now.
	StatusDispatching = "dispatching"
	// StatusTriggered: the run started and has not been polled yet.
	StatusTriggered = "triggered"
)

// RunResult is a dispatched run as the store records it.
type RunResult struct {
	RunKey         string    `json:"run_key" jsonschema:"the run's idempotency key: pass it to get_run_status; the same approval, system and target always give the same key"`
	System         System    `json:"system"`
	Target         string    `json:"target"`
	RunID          string    `json:"run_id,omitempty" jsonschema:"the system's run id (Dagster run id, Airflow dag_run_id, dbt Cloud run id, execution ARN)"`
	UpstreamKey    string    `json:"upstream_key" jsonschema:"the idempotency name the system sees: the Airflow dag_run_id, the Step Functions execution name, the Dagster dataworkers/run_key tag, the [marker] in the dbt Cloud cause"`
	URL            string    `json:"url,omitempty" jsonschema:"where a person can watch the run"`
	Status         string    `json:"status" jsonschema:"not_started (the trigger failed; call again to retry), dispatching, triggered (not polled yet), queued, running, succeeded, failed, canceled or unknown"`
	UpstreamStatus string    `json:"upstream_status,omitempty" jsonschema:"the system's own status word"`
	Terminal       bool      `json:"terminal" jsonschema:"true once the run has ended"`
	Message        string    `json:"message,omitempty" jsonschema:"the system's failure message, or where to look"`
	Existing       bool      `json:"existing" jsonschema:"true when this call started nothing because the run had already been started (a retry)"`
	ProposalID     string    `json:"proposal_id,omitempty"`
	IncidentID     string    `json:"incident_id,omitempty"`
	Domain         string    `json:"domain"`
	Kind           string    `json:"kind"`
	Basis          string    `json:"basis" jsonschema:"why the run was allowed: the approval or the open class"`
	Actor          string    `json:"actor" jsonschema:"agent that dispatched the run"`
	ReceiptID      string    `json:"receipt_id" jsonschema:"receipt that records the run"`
	Attempts       int       `json:"attempts" jsonschema:"trigger attempts so far"`
	LastError      string    `json:"last_error,omitempty" jsonschema:"error of the last failed trigger"`
	ReceiptError   string    `json:"receipt_error,omitempty" jsonschema:"set when the run is recorded but its receipt step could not be written yet; the next call writes it"`
	TriggeredAt    time.Time `json:"triggered_at,omitzero"`
	StartedAt      time.Time `json:"started_at,omitzero"`
	FinishedAt     time.Time `json:"finished_at,omitzero"`
	LastPolledAt   time.Time `json:"last_polled_at,omitzero"`
	Summary        string    `json:"summary" jsonschema:"one line for people"`
}

// Dispatcher dispatches approved runs and follows them. It is safe for
// concurrent use, and several processes may share one store.
type Dispatcher struct {
	db        *store.DB
	approvals *approvals.Service
	runners   Runners
	clk       clock.Clock
	actor     string
	log       *slog.Logger

	// ClaimLease is how long a claimed trigger holds before another
	// attempt may take it over.
	ClaimLease time.Duration
	// PollInterval is the pause between status reads in Poll.
	PollInterval time.Duration
	// MaxWait caps one Poll's wait; 0 means the package's MaxWait.
	MaxWait time.Duration
	// Progress, when set, hears how long Poll has waited of how long
	// (seconds), before each status read of a wait.
	Progress func(done, total float64, msg string)
}

// NewDispatcher builds a dispatcher. actor is the agent that dispatches
// (e.g. dw-connectors); it is recorded on every run and receipt step.
func NewDispatcher(db *store.DB, svc *approvals.Service, runners Runners, actor string, clk clock.Clock, log *slog.Logger) *Dispatcher {
	if clk == nil {
		clk = clock.System{}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Dispatcher{db: db, approvals: svc, runners: runners, clk: clk, actor: actor, log: log,
		ClaimLease: DefaultClaimLease, PollInterval: DefaultPollInterval}
}

// prepared is a validated request.
type prepared struct {
	system     System
	target     string
	proposalID string
	incidentID string
	label      string // proposal id or request key, for the upstream name
	kind       string
	key        string
	params     string // canonical JSON
	runner     Runner
	req        RunRequest
	spec       *approvals.ActionSpec
}

// Run dispatches one run. It returns a run already started for the same
// approval, system and target without dispatching anything. Under a
// proposal it takes the approval's execution claim in the store
// (approvals.BeginExecution: org-wide stop, autonomy level, approval, and
// the run compared field by field with the approved action), so across
// processes an approval starts one run; without one it asks
// approvals.MayDispatch for an open class. Then it claims the run key,
// triggers the run and records it with a receipt step. Refusals are
// *approvals.Refusal and bad input *InputError; neither changes anything.
func (d *Dispatcher) Run(ctx context.Context, p Params) (*RunResult, error) {
	pr, err := d.prepare(ctx, p)
	if err != nil {
		return nil, err
	}
	row, err := loadRun(ctx, d.db, pr.key)
	if err != nil {
		return nil, err
	}
	if row != nil {
		// Params may change only while nothing can have started: after a
		// trigger the system refused.
		if row.Params != pr.params && (row.State != rowTriggerFailed || row.TriggerUnknown) {
			return nil, invalid("run %s was requested with params %s; these differ (%s). The same approval runs a target once: a run with other params needs its own proposal or request_key",
				pr.key, row.Params, pr.params)
		}
		if row.State == rowTriggered {
			return d.result(ctx, row, true), nil
		}
	}
	if pr.kind == "" {
		prop, err := d.approvals.Get(ctx, pr.proposalID)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(RunKinds, prop.Kind) {
			return nil, &approvals.Refusal{Reason: fmt.Sprintf("proposal %s approved a %s, which no orchestrator run carries out (runs carry out %s proposals)",
				prop.ID, prop.Kind, strings.Join(RunKinds, ", "))}
		}
		pr.kind = prop.Kind
	}
	if pr.proposalID == "" {
		permit, err := d.permit(ctx, pr, p.Domain)
		if err != nil {
			return nil, err
		}
		return d.dispatch(ctx, pr, permit, row)
	}
	return d.runApproved(ctx, pr, row)
}

// runApproved carries out an approved proposal under its execution claim.
func (d *Dispatcher) runApproved(ctx context.Context, pr *prepared, row *runRow) (*RunResult, error) {
	exec, err := d.approvals.BeginExecution(ctx, approvals.Action{Kind: pr.kind, ProposalID: pr.proposalID,
		Reversible: pr.kind == approvals.KindRerun, Spec: pr.spec}, d.actor, d.ClaimLease)
	if err != nil {
		return nil, err
	}
	if exec.Done {
		// An earlier call carried the approval out: answer with its run.
		var done struct {
			RunKey string `json:"run_key"`
		}
		_ = json.Unmarshal(exec.Result, &done)
		cur, err := loadRun(ctx, d.db, done.RunKey)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("proposal %s was carried out as run %q, which the store no longer holds", pr.proposalID, done.RunKey)
		}
		return d.result(ctx, cur, true), nil
	}
	res, err := d.dispatch(ctx, pr, exec.Permit, row)
	bg := context.WithoutCancel(ctx)
	if err != nil {
		// Nothing started, or the outcome is unknown and a retry finds it
		// by the same upstream key: either way the next call may try.
		if rerr := d.approvals.ReleaseExecution(bg, exec); rerr != nil {
			d.log.Error("orchestrate: could not release an execution claim", "proposal", pr.proposalID, "err", rerr)
		}
		return nil, err
	}
	if _, ferr := d.approvals.FinishExecution(bg, exec, map[string]string{"run_key": res.RunKey}); ferr != nil {
		d.log.Error("orchestrate: could not record the execution", "proposal", pr.proposalID, "run_key", res.RunKey, "err", ferr)
	}
	return res, nil
}

func (d *Dispatcher) prepare(ctx context.Context, p Params) (*prepared, error) {
	sys, ok := parseSystem(string(p.System))
	if !ok {
		return nil, invalid("unknown system %q; closest: %s (valid: %s)", p.System,
			strings.Join(suggest.Closest(string(p.System), systemNames(), 1), ", "), strings.Join(systemNames(), ", "))
	}
	pr := &prepared{system: sys, target: strings.TrimSpace(p.Target), proposalID: strings.ToUpper(strings.TrimSpace(p.ProposalID)),
		incidentID: strings.TrimSpace(p.IncidentID), kind: strings.TrimSpace(p.Kind)}
	if pr.target == "" {
		return nil, invalid("target is empty: name the %s to run", targetNoun(sys))
	}
	runner, err := d.runners.get(sys)
	if err != nil {
		return nil, err
	}
	pr.runner = runner
	if pr.proposalID != "" {
		// An empty kind is the proposal's, read once the store has shown
		// that this is not a retry of a run already started.
		pr.label = pr.proposalID
		pr.key = pr.proposalID + "/" + string(sys) + "/" + pr.target
	} else {
		if pr.kind == "" {
			pr.kind = approvals.KindRerun
		}
		pr.label = strings.TrimSpace(p.RequestKey)
		if pr.label == "" {
			pr.label = pr.incidentID
		}
		if pr.label == "" {
			return nil, invalid("without a proposal_id, name the request with request_key (or incident_id), e.g. INC-12-egress-rerun: a retry with the same name finds the run instead of starting a second one")
		}
		pr.key = "open/" + pr.kind + "/" + pr.label + "/" + string(sys) + "/" + pr.target
	}
	if pr.kind != "" && !slices.Contains(RunKinds, pr.kind) {
		return nil, invalid("kind %q is not a run; closest: %s (a run carries out one of: %s)", pr.kind,
			strings.Join(suggest.Closest(pr.kind, RunKinds, 1), ", "), strings.Join(RunKinds, ", "))
	}
	if err := exactNumbers(p.Params); err != nil {
		return nil, err
	}
	pr.params, err = canonicalParams(p.Params)
	if err != nil {
		return nil, err
	}
	pr.req = RunRequest{Key: upstreamKey(pr.key, pr.label), Target: pr.target, Params: p.Params}
	if err := runner.Validate(pr.req); err != nil {
		return nil, err
	}
	if pr.proposalID != "" {
		if pr.spec, err = actionSpec(runner, sys, pr.target, p.Params); err != nil {
			return nil, err
		}
	}
	return pr, nil
}

func targetNoun(s System) string {
	switch s {
	case Dagster:
		return "job as location/repository/job"
	case Airflow:
		return "DAG id"
	case DBTCloud:
		return "job id"
	}
	return "state machine ARN"
}

// permit asks the approvals rules whether an open class allows a run
// without a proposal. Open classes apply to the domain's own assets only,
// so the domain comes from the asset, never from the caller.
func (d *Dispatcher) permit(ctx context.Context, pr *prepared, domain string) (approvals.Permit, error) {
	asset := AssetID(pr.system, pr.target)
	permit, err := d.approvals.MayDispatch(ctx, approvals.Action{Kind: pr.kind, Asset: asset, Reversible: pr.kind == approvals.KindRerun})
	if err != nil {
		return permit, err
	}
	if domain = strings.TrimSpace(domain); domain != "" && domain != permit.Domain {
		return permit, &approvals.Refusal{Reason: fmt.Sprintf("%s belongs to domain %s, not %s; only %s's rules can allow running it",
			asset, permit.Domain, domain, permit.Domain)}
	}
	return permit, nil
}

func (d *Dispatcher) dispatch(ctx context.Context, pr *prepared, permit approvals.Permit, row *runRow) (*RunResult, error) {
	now := d.clk.Now()
	token := newToken()
	receiptID := pr.incidentID
	if prop := permit.Proposal; prop != nil {
		// The proposal says which incident it remedies and where its
		// steps are recorded.
		pr.incidentID, receiptID = prop.IncidentID, prop.ReceiptID
	}
	if receiptID == "" {
		receiptID = pr.key
	}
	claimed := false
	var err error
	if row == nil {
		claimed, err = insertClaim(ctx, d.db, &runRow{Key: pr.key, UpstreamKey: pr.req.Key, ProposalID: pr.proposalID,
			IncidentID: pr.incidentID, ReceiptID: receiptID, Domain: permit.Domain, Kind: pr.kind, Basis: permit.Basis,
			Actor: d.actor, System: pr.system, Target: pr.target, Params: pr.params, ClaimToken: token,
			ClaimedMs: store.Millis(now), CreatedMs: store.Millis(now), UpdatedMs: store.Millis(now)})
		if err != nil {
			return nil, err
		}
	}
	if !claimed {
		claimed, err = reclaim(ctx, d.db, pr.key, token, permit.Basis, pr.params, now, d.ClaimLease)
		if err != nil {
			return nil, err
		}
	}
	if !claimed {
		cur, err := loadRun(ctx, d.db, pr.key)
		if err != nil {
			return nil, err
		}
		if cur != nil && cur.State == rowTriggered {
			return d.result(ctx, cur, true), nil
		}
		since := ""
		if cur != nil {
			since = " since " + store.FromMillis(cur.ClaimedMs).UTC().Format("15:04:05 UTC")
		}
		return nil, fmt.Errorf("run %s is being dispatched by another call%s; ask get_run_status in a moment (a claim left by a crashed process lapses after %s)",
			pr.key, since, d.ClaimLease)
	}
	pr.req.Reason = reasonFor(pr, permit, d.actor)
	ref, terr := pr.runner.Trigger(ctx, pr.req)
	// The bookkeeping must outlive a caller that gave up mid-trigger, or
	// the claim would hold until its lease runs out.
	bg := context.WithoutCancel(ctx)
	if terr != nil {
		var te *rest.TransportError
		unknown := errors.As(terr, &te)
		if err := markFailed(bg, d.db, pr.key, token, terr.Error(), unknown, d.clk.Now()); err != nil {
			d.log.Error("orchestrate: could not record a failed trigger", "run_key", pr.key, "err", err)
		}
		if unknown {
			return nil, fmt.Errorf("%w. The run may or may not have started: call again with the same arguments; the retry finds a run that did start and never starts a second one (run key %s)", terr, pr.key)
		}
		return nil, fmt.Errorf("%w. Nothing was started (run key %s)", terr, pr.key)
	}
	ok, err := markTriggered(bg, d.db, pr.key, token, ref, d.clk.Now())
	if err != nil {
		return nil, fmt.Errorf("%w; the run was started: %s", err, ref.URL)
	}
	if !ok {
		d.log.Warn("orchestrate: claim was taken over during the trigger; keeping the recorded run", "run_key", pr.key, "run_id", ref.RunID)
	}
	cur, err := loadRun(bg, d.db, pr.key)
	if err != nil {
		return nil, err
	}
	return d.result(bg, cur, ref.Existing || !ok), nil
}

// reasonFor is what the system records as the run's cause.
func reasonFor(pr *prepared, permit approvals.Permit, actor string) string {
	if pr.proposalID != "" {
		return fmt.Sprintf("Data Workers %s: %s (%s)", actor, permit.Basis, pr.kind)
	}
	return fmt.Sprintf("Data Workers %s: %s (%s)", actor, permit.Basis, pr.label)
}

// Get reads a run by its key (or proposal id or run id) without calling
// the system.
func (d *Dispatcher) Get(ctx context.Context, key string) (*RunResult, error) {
	row, err := d.find(ctx, key)
	if err != nil {
		return nil, err
	}
	return d.result(ctx, row, false), nil
}

// List reads the runs of a proposal ("" lists every run), newest first.
func (d *Dispatcher) List(ctx context.Context, proposalID string) ([]RunResult, error) {
	var rows []*runRow
	var err error
	if id := strings.ToUpper(strings.TrimSpace(proposalID)); id != "" {
		rows, err = queryRuns(ctx, d.db, `WHERE proposal_id = ? ORDER BY created_ms DESC, run_key`, id)
	} else {
		rows, err = queryRuns(ctx, d.db, `ORDER BY created_ms DESC, run_key LIMIT 500`)
	}
	if err != nil {
		return nil, err
	}
	out := make([]RunResult, 0, len(rows))
	for _, r := range rows {
		out = append(out, *d.result(ctx, r, false))
	}
	return out, nil
}

// find resolves a run key, else a proposal with exactly one run, else a
// system run id.
func (d *Dispatcher) find(ctx context.Context, key string) (*runRow, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return nil, invalid("no run named: pass the run_key a trigger tool returned (or its run_id, upstream_key or proposal_id)")
	}
	row, err := loadRun(ctx, d.db, key)
	if err != nil || row != nil {
		return row, err
	}
	byProposal, err := queryRuns(ctx, d.db, `WHERE proposal_id = ? ORDER BY created_ms`, strings.ToUpper(key))
	if err != nil {
		return nil, err
	}
	if len(byProposal) == 1 {
		return byProposal[0], nil
	}
	if len(byProposal) > 1 {
		keys := make([]string, len(byProposal))
		for i, r := range byProposal {
			keys[i] = r.Key
		}
		return nil, invalid("proposal %s has %d runs; name one by run_key: %s", strings.ToUpper(key), len(keys), strings.Join(keys, ", "))
	}
	byRun, err := queryRuns(ctx, d.db, `WHERE run_id = ? OR upstream_key = ? ORDER BY created_ms`, key, key)
	if err != nil {
		return nil, err
	}
	if len(byRun) > 0 {
		return byRun[0], nil
	}
	recent, err := queryRuns(ctx, d.db, `ORDER BY created_ms DESC LIMIT 200`)
	if err != nil {
		return nil, err
	}
	if len(recent) == 0 {
		return nil, invalid("no run %q: no run has been dispatched yet", key)
	}
	keys := make([]string, len(recent))
	for i, r := range recent {
		keys[i] = r.Key
	}
	return nil, invalid("no run %q; closest: %s", key, strings.Join(suggest.Closest(key, keys, 3), ", "))
}

// result builds the answer for a row, first writing any receipt step
// the row still owes.
func (d *Dispatcher) result(ctx context.Context, r *runRow, existing bool) *RunResult {
	res := &RunResult{RunKey: r.Key, System: r.System, Target: r.Target, RunID: r.RunID, URL: r.URL, UpstreamKey: r.UpstreamKey,
		UpstreamStatus: r.UpstreamStatus, Terminal: r.Status.Terminal(), Message: r.StatusMessage, Existing: existing,
		ProposalID: r.ProposalID, IncidentID: r.IncidentID, Domain: r.Domain, Kind: r.Kind, Basis: r.Basis, Actor: r.Actor,
		ReceiptID: r.ReceiptID, Attempts: r.Attempts, LastError: r.LastError,
		TriggeredAt: millis(r.TriggeredMs), StartedAt: millis(r.StartedMs), FinishedAt: millis(r.FinishedMs), LastPolledAt: millis(r.PolledMs)}
	if r.State == rowTriggered {
		if err := d.writeReceipt(ctx, r); err != nil {
			res.ReceiptError = err.Error()
			d.log.Warn("orchestrate: receipt step not written", "run_key", r.Key, "err", err)
		}
	}
	switch {
	case r.State == rowTriggerFailed:
		res.Status = StatusNotStarted
		res.Summary = fmt.Sprintf("%s run of %s not started: %s", r.System, r.Target, r.LastError)
	case r.State == rowClaimed:
		res.Status = StatusDispatching
		res.Summary = fmt.Sprintf("%s run of %s is being dispatched", r.System, r.Target)
	case r.Status == "":
		res.Status = StatusTriggered
		res.Summary = fmt.Sprintf("%s run %s of %s started (%s)", r.System, r.RunID, r.Target, r.Basis)
	default:
		res.Status = string(r.Status)
		res.Summary = fmt.Sprintf("%s run %s of %s: %s", r.System, r.RunID, r.Target, r.Status)
		if r.StatusMessage != "" && r.Status != StateSucceeded {
			res.Summary += " — " + r.StatusMessage
		}
	}
	if existing && r.State == rowTriggered {
		res.Summary += " (already started earlier; nothing new was dispatched)"
	}
	return res
}

func millis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return store.FromMillis(ms).UTC()
}

// upstreamKey is the name the system sees: readable (it starts with the
// proposal id or request name) and unique (a hash of the whole key), in
// the characters every system accepts and within Step Functions' 80.
func upstreamKey(key, label string) string {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	for _, c := range label {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return "dw-" + b.String() + "-" + hex.EncodeToString(sum[:8])
}

func canonicalParams(p map[string]any) (string, error) {
	if len(p) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(p) // map keys sorted: the same params give the same text
	if err != nil {
		return "", invalid("params cannot be encoded as JSON: %v", err)
	}
	// Round-trip so numbers and nested maps compare by value.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", invalid("params cannot be encoded as JSON: %v", err)
	}
	b, _ = json.Marshal(v)
	return string(b), nil
}

func newToken() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("orchestrate: no randomness: %v", err))
	}
	return hex.EncodeToString(b[:])
}
