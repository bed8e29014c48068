package orchestrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/rest"
)

// StepFunctionsRunner starts AWS Step Functions executions. The key is
// the execution name: StartExecution with a name and input already
// running returns that execution, and for a closed one (or another input)
// answers ExecutionAlreadyExists, after which the runner reads the named
// execution and accepts it only if its input is the same.
type StepFunctionsRunner struct {
	client   *sfn.Client
	region   string
	endpoint string
	timeout  time.Duration
}

// NewStepFunctionsRunner builds a runner for svc.Region. svc.URL, when
// set, overrides the endpoint (a VPC endpoint, LocalStack, a test
// server). Credentials are static: the access key id from the variable
// named by username_env, the secret key from password_env and an optional
// session token from token_env; without those names, the standard
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
func NewStepFunctionsRunner(svc *config.Service) (*StepFunctionsRunner, error) {
	region := strings.TrimSpace(svc.Region)
	if region == "" {
		return nil, fmt.Errorf("step_functions: orchestrators.step_functions.region is not set (e.g. us-east-1)")
	}
	timeout := svc.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	endpoint := strings.TrimRight(strings.TrimSpace(svc.URL), "/")
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("step_functions: url %q is not valid; want http(s)://host[:port] (or leave it empty for the AWS endpoint)", endpoint)
		}
	}
	opts := sfn.Options{
		Region:      region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return sfnCredentials(svc) }),
		HTTPClient:  &http.Client{Timeout: timeout},
		// The dispatcher retries, and the execution name makes that safe;
		// SDK retries would hide a lost answer behind a longer wait.
		Retryer: aws.NopRetryer{},
	}
	if endpoint != "" {
		opts.BaseEndpoint = aws.String(endpoint)
	}
	shown := endpoint
	if shown == "" {
		shown = "https://states." + region + ".amazonaws.com"
	}
	return &StepFunctionsRunner{client: sfn.New(opts), region: region, endpoint: shown, timeout: timeout}, nil
}

func sfnCredentials(svc *config.Service) (aws.Credentials, error) {
	idEnv, secretEnv, tokenEnv := svc.UsernameEnv, svc.PasswordEnv, svc.TokenEnv
	what := "orchestrators.step_functions"
	if idEnv == "" && secretEnv == "" {
		idEnv, secretEnv, what = "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "the AWS default"
		if tokenEnv == "" {
			tokenEnv = "AWS_SESSION_TOKEN"
		}
	}
	id, err := config.Secret(idEnv, what+" username_env (access key id)")
	if err != nil {
		return aws.Credentials{}, err
	}
	secret, err := config.Secret(secretEnv, what+" password_env (secret access key)")
	if err != nil {
		return aws.Credentials{}, err
	}
	creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, Source: "dw.yaml orchestrators.step_functions"}
	if tokenEnv != "" {
		creds.SessionToken = os.Getenv(tokenEnv)
	}
	return creds, nil
}

// System is Step Functions.
func (r *StepFunctionsRunner) System() System { return StepFunctions }

// Location is the endpoint, the configured region and the state
// machine's AWS account (from its ARN).
func (r *StepFunctionsRunner) Location(target string) approvals.ActionLocation {
	loc := approvals.ActionLocation{Instance: r.endpoint, Region: r.region}
	if parts := strings.Split(target, ":"); len(parts) > 4 {
		loc.Account = parts[4]
	}
	return loc
}

// Compiled on first use: a counted repetition like {0,254} compiles to
// one instruction per count, hundreds of KB built at every agent start.
var stateMachineARN = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}(:[A-Za-z0-9_-]{1,80})?$`)
})

// sfnName is the rule for execution names (letters, digits, '-', '_', at
// most 80), which every idempotency key follows.
var sfnName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`) })

// Validate checks the state machine ARN and the params (input: an object).
func (r *StepFunctionsRunner) Validate(req RunRequest) error {
	if !stateMachineARN().MatchString(req.Target) {
		return invalid("state machine ARN %q is not valid; want arn:aws:states:<region>:<account>:stateMachine:<name>", req.Target)
	}
	if err := knownParams(StepFunctions, req.Params, []string{"input"}); err != nil {
		return err
	}
	if in, ok := req.Params["input"]; ok && in != nil {
		if _, ok := in.(map[string]any); !ok {
			return invalid("step_functions input must be an object (the execution's JSON input), got %T", in)
		}
	}
	if !sfnName().MatchString(req.Key) {
		return invalid("execution name %q is not valid: letters, digits, '-' and '_', at most 80", req.Key)
	}
	return nil
}

func sfnInput(params map[string]any) string {
	in, _ := params["input"].(map[string]any)
	if in == nil {
		return "{}"
	}
	b, _ := json.Marshal(in) // map keys are sorted, so the same input is the same text
	return string(b)
}

// Trigger starts the execution named by the key, or finds it.
func (r *StepFunctionsRunner) Trigger(ctx context.Context, req RunRequest) (RunRef, error) {
	if err := r.Validate(req); err != nil {
		return RunRef{}, err
	}
	ref := RunRef{System: StepFunctions, Target: req.Target}
	input := sfnInput(req.Params)
	out, err := r.client.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(req.Target), Name: aws.String(req.Key), Input: aws.String(input),
	})
	if err == nil {
		arn := aws.ToString(out.ExecutionArn)
		ref.RunID, ref.URL = arn, r.consoleURL(arn)
		return ref, nil
	}
	var exists *types.ExecutionAlreadyExists
	if !errors.As(err, &exists) {
		return ref, r.explain("StartExecution", req.Target, err)
	}
	// A closed execution with this name (a retry after the run ended), or
	// the same name with another input: read it to tell which.
	arn := executionARN(req.Target, req.Key)
	d, derr := r.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if derr != nil {
		return ref, fmt.Errorf("%w; reading %s failed: %v", r.explain("StartExecution", req.Target, err), arn, r.explain("DescribeExecution", arn, derr))
	}
	if !sameJSON(aws.ToString(d.Input), input) {
		return ref, fmt.Errorf("step_functions: an execution named %s already exists on %s with another input; it is not this run (its input: %s)",
			req.Key, req.Target, aws.ToString(d.Input))
	}
	ref.RunID, ref.URL, ref.Existing = arn, r.consoleURL(arn), true
	return ref, nil
}

// Status describes the execution.
func (r *StepFunctionsRunner) Status(ctx context.Context, ref RunRef) (RunStatus, error) {
	d, err := r.client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(ref.RunID)})
	if err != nil {
		return RunStatus{}, r.explain("DescribeExecution", ref.RunID, err)
	}
	st := RunStatus{State: sfnState(d.Status), Upstream: string(d.Status), StartedAt: aws.ToTime(d.StartDate).UTC(),
		FinishedAt: aws.ToTime(d.StopDate)}
	if !st.FinishedAt.IsZero() {
		st.FinishedAt = st.FinishedAt.UTC()
	}
	if e, c := aws.ToString(d.Error), aws.ToString(d.Cause); e != "" || c != "" {
		st.Message = strings.TrimPrefix(e+": "+c, ": ")
	}
	return st, nil
}

func sfnState(s types.ExecutionStatus) State {
	switch s {
	case types.ExecutionStatusRunning, types.ExecutionStatusPendingRedrive:
		return StateRunning
	case types.ExecutionStatusSucceeded:
		return StateSucceeded
	case types.ExecutionStatusFailed, types.ExecutionStatusTimedOut:
		return StateFailed
	case types.ExecutionStatusAborted:
		return StateCanceled
	}
	return StateUnknown
}

// explain turns an SDK error into one that names what was called where:
// an answer from the service keeps its code and message, anything else is
// a transport failure naming the endpoint and timeout.
func (r *StepFunctionsRunner) explain(op, subject string, err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		hint := ""
		switch api.ErrorCode() {
		case "StateMachineDoesNotExist":
			hint = " (check the ARN and the region " + r.region + ")"
		case "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException":
			hint = " (check the credentials named by orchestrators.step_functions and their states:" + op + " permission)"
		}
		return fmt.Errorf("step_functions: %s on %s at %s answered %s: %s%s", op, subject, r.endpoint, api.ErrorCode(), api.ErrorMessage(), hint)
	}
	return rest.NewTransportError(string(StepFunctions), "POST "+op, r.endpoint, r.timeout, err)
}

// executionARN is the ARN Step Functions gives the execution name of a
// state machine (a version or alias suffix is not part of it).
func executionARN(stateMachine, name string) string {
	prefix, sm, _ := strings.Cut(stateMachine, ":stateMachine:")
	sm, _, _ = strings.Cut(sm, ":")
	return prefix + ":execution:" + sm + ":" + name
}

func (r *StepFunctionsRunner) consoleURL(executionARN string) string {
	return fmt.Sprintf("https://%s.console.aws.amazon.com/states/home?region=%s#/v2/executions/details/%s", r.region, r.region, executionARN)
}

// sameJSON compares two JSON texts by value.
func sameJSON(a, b string) bool {
	if bytes.Equal([]byte(a), []byte(b)) {
		return true
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
