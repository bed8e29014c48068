package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// DefaultDBTCloudURL is dbt Cloud's multi-tenant host; cell-based and
// single-tenant accounts set their own access URL in the config.
const DefaultDBTCloudURL = "https://cloud.getdbt.com"

// dbtCauseMax is dbt Cloud's limit on a run's cause.
const dbtCauseMax = 255

// dbtLookback is how many of a job's newest runs a retry searches for the
// key; a lost trigger answer is retried within minutes, long before a job
// has run this often again.
const dbtLookback = 100

// DBTCloudRunner triggers dbt Cloud jobs over the v2 API. dbt Cloud has no
// idempotency key of its own, so the key is written into the run's cause
// as "[key]" and a trigger first looks for a recent run of the job whose
// cause carries it.
type DBTCloudRunner struct {
	c       *restClient
	account string
}

// NewDBTCloudRunner builds a runner for the account svc.AccountID, with
// the API token named by svc.TokenEnv.
func NewDBTCloudRunner(svc *config.Service) (*DBTCloudRunner, error) {
	acct := strings.TrimSpace(svc.AccountID)
	if !digits().MatchString(acct) {
		return nil, fmt.Errorf("dbt_cloud: orchestrators.dbt_cloud.account_id %q is not valid; it is the number after /accounts/ in dbt Cloud URLs", svc.AccountID)
	}
	if svc.TokenEnv == "" {
		return nil, fmt.Errorf("dbt_cloud: orchestrators.dbt_cloud.token_env is not set; name the environment variable holding a service token that may run jobs")
	}
	c, err := newRESTClient(DBTCloud, svc, DefaultDBTCloudURL)
	if err != nil {
		return nil, err
	}
	c.auth = func(r *http.Request) error {
		tok, err := config.Secret(svc.TokenEnv, "orchestrators.dbt_cloud.token_env")
		if err != nil {
			return err
		}
		r.Header.Set("Authorization", "Token "+tok)
		return nil
	}
	c.message = dbtMessage
	return &DBTCloudRunner{c: c, account: acct}, nil
}

var digits = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,19}$`) })

// dbtMessage reads the status envelope of a dbt Cloud error answer.
func dbtMessage(body []byte) string {
	var env struct {
		Status struct {
			UserMessage      string `json:"user_message"`
			DeveloperMessage string `json:"developer_message"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	msg := env.Status.UserMessage
	if d := env.Status.DeveloperMessage; d != "" && d != msg {
		if msg != "" {
			msg += ": "
		}
		msg += d
	}
	return msg
}

// System is dbt Cloud.
func (r *DBTCloudRunner) System() System { return DBTCloud }

// Location is the dbt Cloud access URL and the account.
func (r *DBTCloudRunner) Location(string) approvals.ActionLocation {
	return approvals.ActionLocation{Instance: approvals.NormalizeURL(r.c.base.String()), Account: r.account}
}

// dbtOverrides are the run overrides the trigger endpoint accepts, with
// the JSON type each takes.
var dbtOverrides = map[string]string{
	"git_sha": "string", "git_branch": "string", "schema_override": "string", "dbt_version_override": "string",
	"target_name_override": "string", "threads_override": "integer", "timeout_seconds_override": "integer",
	"generate_docs_override": "boolean", "steps_override": "strings",
}

// Ranges of dbt Cloud's numeric overrides: threads as dbt runs them, and a
// run timeout of at most a day (0 is dbt Cloud's "no timeout", which an
// override has no reason to ask for).
const (
	MaxDBTThreads        = 64
	MaxDBTTimeoutSeconds = 86_400
)

// dbtRanges are the inclusive ranges of the integer overrides.
var dbtRanges = map[string][2]int64{
	"threads_override":         {1, MaxDBTThreads},
	"timeout_seconds_override": {1, MaxDBTTimeoutSeconds},
}

// DBTCloudParams lists the params a dbt Cloud run takes (its overrides).
var DBTCloudParams = []string{"git_branch", "git_sha", "schema_override", "dbt_version_override", "target_name_override",
	"threads_override", "timeout_seconds_override", "generate_docs_override", "steps_override"}

// Validate checks the job id and the overrides.
func (r *DBTCloudRunner) Validate(req RunRequest) error {
	if !digits().MatchString(req.Target) {
		return invalid("dbt Cloud job id %q is not valid; it is the number after /jobs/ in the job's URL", req.Target)
	}
	if err := knownParams(DBTCloud, req.Params, DBTCloudParams); err != nil {
		return err
	}
	for k, v := range req.Params {
		if v == nil {
			continue
		}
		ok := true
		switch dbtOverrides[k] {
		case "string":
			_, ok = v.(string)
		case "integer":
			ok = isInteger(v)
		case "boolean":
			_, ok = v.(bool)
		case "strings":
			ok = isStrings(v)
		}
		if !ok {
			want := dbtOverrides[k]
			if want == "strings" {
				want = "list of strings (dbt commands, e.g. [\"dbt build -s fct_billable_egress\"])"
			}
			return invalid("dbt Cloud %s must be a %s, got %T", k, want, v)
		}
		if r, bounded := dbtRanges[k]; bounded {
			if n := integerOf(v); n < r[0] || n > r[1] {
				return invalid("dbt Cloud %s %d is out of range: give %d to %d", k, n, r[0], r[1])
			}
		}
	}
	return nil
}

// integerOf is the value of an integer isInteger accepted.
func integerOf(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case int64:
		return n
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}

func isInteger(v any) bool {
	switch n := v.(type) {
	case int, int32, int64:
		return true
	case float64:
		return n == float64(int64(n))
	case json.Number:
		_, err := n.Int64()
		return err == nil
	}
	return false
}

func isStrings(v any) bool {
	switch s := v.(type) {
	case []string:
		return true
	case []any:
		for _, x := range s {
			if _, ok := x.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// dbtRun is the Run object of the v2 API (the fields read here).
type dbtRun struct {
	ID              int64   `json:"id"`
	JobDefinitionID int64   `json:"job_definition_id"`
	Status          int     `json:"status"`
	StatusHumanized string  `json:"status_humanized"`
	StatusMessage   *string `json:"status_message"`
	StartedAt       *string `json:"started_at"`
	FinishedAt      *string `json:"finished_at"`
	Href            string  `json:"href"`
	Trigger         *struct {
		Cause string `json:"cause"`
	} `json:"trigger"`
}

// cause is the run's cause with the key marker; the reason is cut so the
// marker always fits dbt Cloud's limit.
func dbtCause(reason, key string) string {
	marker := " [" + key + "]"
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "Data Workers"
	}
	if room := dbtCauseMax - len(marker); len(reason) > room {
		cut := max(room-3, 0)
		for cut > 0 && !utf8.RuneStart(reason[cut]) {
			cut--
		}
		reason = reason[:cut] + "..."
	}
	return reason + marker
}

// Trigger runs the job unless a recent run of it carries the key.
func (r *DBTCloudRunner) Trigger(ctx context.Context, req RunRequest) (RunRef, error) {
	if err := r.Validate(req); err != nil {
		return RunRef{}, err
	}
	ref := RunRef{System: DBTCloud, Target: req.Target}
	if run, err := r.findByKey(ctx, req.Target, req.Key); err != nil {
		return ref, err
	} else if run != nil {
		ref.RunID, ref.URL, ref.Existing = strconv.FormatInt(run.ID, 10), run.Href, true
		return ref, nil
	}
	body := map[string]any{"cause": dbtCause(req.Reason, req.Key)}
	for k, v := range req.Params {
		if v != nil {
			body[k] = v
		}
	}
	target := r.c.urlOf(nil, "api", "v2", "accounts", r.account, "jobs", req.Target, "run", "")
	status, data, err := r.c.do(ctx, http.MethodPost, target, body)
	if err != nil {
		return ref, err
	}
	if status >= 300 {
		return ref, r.fail(http.MethodPost, target, status, data, "is job "+req.Target+" in account "+r.account+"?")
	}
	var env struct {
		Data *dbtRun `json:"data"`
	}
	if err := r.c.decode(target, data, &env); err != nil {
		return ref, err
	}
	if env.Data == nil || env.Data.ID == 0 {
		return ref, fmt.Errorf("dbt_cloud: %s answered without a run", target)
	}
	ref.RunID, ref.URL = strconv.FormatInt(env.Data.ID, 10), env.Data.Href
	return ref, nil
}

func (r *DBTCloudRunner) findByKey(ctx context.Context, jobID, key string) (*dbtRun, error) {
	q := url.Values{"job_definition_id": {jobID}, "order_by": {"-id"}, "include_related": {`["trigger"]`},
		"limit": {strconv.Itoa(dbtLookback)}}
	target := r.c.urlOf(q, "api", "v2", "accounts", r.account, "runs", "")
	status, data, err := r.c.do(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if status >= 300 {
		return nil, r.fail(http.MethodGet, target, status, data, "looking for an earlier run of job "+jobID+" with key "+key)
	}
	var env struct {
		Data []dbtRun `json:"data"`
	}
	if err := r.c.decode(target, data, &env); err != nil {
		return nil, err
	}
	marker := "[" + key + "]"
	for i := range env.Data {
		if t := env.Data[i].Trigger; t != nil && strings.Contains(t.Cause, marker) {
			return &env.Data[i], nil
		}
	}
	return nil, nil
}

// Status reads the run.
func (r *DBTCloudRunner) Status(ctx context.Context, ref RunRef) (RunStatus, error) {
	target := r.c.urlOf(nil, "api", "v2", "accounts", r.account, "runs", ref.RunID, "")
	status, data, err := r.c.do(ctx, http.MethodGet, target, nil)
	if err != nil {
		return RunStatus{}, err
	}
	if status >= 300 {
		return RunStatus{}, r.fail(http.MethodGet, target, status, data, "is run "+ref.RunID+" in account "+r.account+"?")
	}
	var env struct {
		Data *dbtRun `json:"data"`
	}
	if err := r.c.decode(target, data, &env); err != nil {
		return RunStatus{}, err
	}
	if env.Data == nil {
		return RunStatus{}, fmt.Errorf("dbt_cloud: %s answered without a run", target)
	}
	run := env.Data
	up := strconv.Itoa(run.Status)
	if run.StatusHumanized != "" {
		up += " (" + run.StatusHumanized + ")"
	}
	st := RunStatus{State: dbtState(run.Status), Upstream: up, StartedAt: dbtTime(run.StartedAt), FinishedAt: dbtTime(run.FinishedAt)}
	if run.StatusMessage != nil {
		st.Message = *run.StatusMessage
	}
	return st, nil
}

// dbtState maps dbt Cloud's run status codes.
func dbtState(code int) State {
	switch code {
	case 1, 2:
		return StateQueued
	case 3:
		return StateRunning
	case 10:
		return StateSucceeded
	case 20:
		return StateFailed
	case 30:
		return StateCanceled
	}
	return StateUnknown
}

// dbtTime parses dbt Cloud's timestamps ("2021-11-01 22:48:28.595439+00:00"
// in v2 answers, RFC 3339 elsewhere).
func dbtTime(s *string) time.Time {
	if s == nil || *s == "" {
		return time.Time{}
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999-07:00", time.RFC3339Nano, "2006-01-02 15:04:05-07:00"} {
		if t, err := time.Parse(layout, *s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// fail explains an error answer: credentials for 401 and 403, the
// caller's notFound question for 404.
func (r *DBTCloudRunner) fail(method, target string, status int, body []byte, notFound string) error {
	ae := r.c.apiError(method, target, status, body)
	switch status {
	case http.StatusNotFound:
		return fmt.Errorf("%w (%s)", ae, notFound)
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (the token named by orchestrators.dbt_cloud.token_env needs the Job Runner permission)", ae)
	}
	return ae
}
