package orchestratetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"time"
)

// StepFunctionsAccessKey is an access key id of the documented example
// form, for callers that need one.
const StepFunctionsAccessKey = "AKIAIOSFODNN7EXAMPLE"

// StepFunctionsServer is AWS Step Functions speaking the AWS JSON 1.0
// protocol: POST / with X-Amz-Target AWSStepFunctions.StartExecution or
// AWSStepFunctions.DescribeExecution, errors as a 400 with
// X-Amzn-ErrorType and {"__type", "message"}. StartExecution is
// idempotent on the name as AWS documents: the same name and input of a
// running execution return it; a closed one, or another input, is
// ExecutionAlreadyExists.
type StepFunctionsServer struct {
	*core
	srv       *httptest.Server
	machines  map[string]bool
	accessKey string
}

// NewStepFunctionsServer starts the service with the given state machine ARNs.
func NewStepFunctionsServer(stateMachineARNs ...string) *StepFunctionsServer {
	s := &StepFunctionsServer{core: newCore(), machines: map[string]bool{}}
	for _, a := range stateMachineARNs {
		s.machines[a] = true
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the endpoint to configure as the override.
func (s *StepFunctionsServer) URL() string { return s.srv.URL }

// Close stops the server.
func (s *StepFunctionsServer) Close() { s.srv.Close() }

// RequireAccessKey sets the access key id requests must be signed with;
// until it is called any SigV4-signed request is accepted.
func (s *StepFunctionsServer) RequireAccessKey(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accessKey = id
}

// Input returns the input of the newest execution of a state machine.
func (s *StepFunctionsServer) Input(stateMachineARN string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.findRun(func(r *run) bool { return r.target == stateMachineARN }); r != nil {
		return r.input
	}
	return ""
}

func awsError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}

func awsJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(v)
}

var sigV4Credential = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/([a-z0-9-]+)/states/aws4_request, SignedHeaders=[^,]+, Signature=[0-9a-f]{64}$`)

func (s *StepFunctionsServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		awsError(w, http.StatusNotFound, "UnknownOperationException", "")
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.0" {
		awsError(w, http.StatusBadRequest, "SerializationException", "Content-Type must be application/x-amz-json-1.0, got "+ct)
		return
	}
	m := sigV4Credential.FindStringSubmatch(r.Header.Get("Authorization"))
	s.mu.Lock()
	key := s.accessKey
	s.mu.Unlock()
	if m == nil {
		awsError(w, http.StatusBadRequest, "MissingAuthenticationTokenException", "Missing Authentication Token")
		return
	}
	if key != "" && m[1] != key {
		awsError(w, http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		awsError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	switch r.Header.Get("X-Amz-Target") {
	case "AWSStepFunctions.StartExecution":
		s.start(w, r, body)
	case "AWSStepFunctions.DescribeExecution":
		s.describe(w, body)
	default:
		awsError(w, http.StatusBadRequest, "UnknownOperationException", "")
	}
}

// executionARN is the ARN AWS gives an execution of a state machine.
func executionARN(machine, name string) string {
	prefix, sm, _ := strings.Cut(machine, ":stateMachine:")
	sm, _, _ = strings.Cut(sm, ":")
	return prefix + ":execution:" + sm + ":" + name
}

var executionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func (s *StepFunctionsServer) start(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct {
		StateMachineArn string  `json:"stateMachineArn"`
		Name            string  `json:"name"`
		Input           *string `json:"input"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		awsError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	input := "{}"
	if in.Input != nil {
		input = *in.Input
		if !json.Valid([]byte(input)) {
			awsError(w, http.StatusBadRequest, "InvalidExecutionInput", "Invalid State Machine Execution Input: 'Unexpected character'")
			return
		}
	}
	if in.Name == "" {
		in.Name = newUUID()
	}
	if !executionName.MatchString(in.Name) {
		awsError(w, http.StatusBadRequest, "InvalidName", "Invalid Name: '"+in.Name+"'")
		return
	}
	s.mu.Lock()
	if !s.machines[in.StateMachineArn] {
		s.mu.Unlock()
		awsError(w, http.StatusBadRequest, "StateMachineDoesNotExist", "State Machine Does Not Exist: '"+in.StateMachineArn+"'")
		return
	}
	arn := executionARN(in.StateMachineArn, in.Name)
	now := time.Now().UTC()
	if ex := s.findRun(func(x *run) bool { return x.id == arn }); ex != nil {
		running := ex.phase(now) < phaseSucceeded
		same := ex.input == input
		answer := map[string]any{"executionArn": ex.id, "startDate": epoch(ex.created)}
		s.mu.Unlock()
		if running && same {
			awsJSON(w, answer)
			return
		}
		awsError(w, http.StatusBadRequest, "ExecutionAlreadyExists", "Execution Already Exists: '"+arn+"'")
		return
	}
	rn := s.newRun(arn, in.StateMachineArn, in.Name)
	rn.input = input
	answer := map[string]any{"executionArn": arn, "startDate": epoch(rn.created)}
	s.mu.Unlock()
	if !s.holdAnswer(r) {
		return
	}
	awsJSON(w, answer)
}

func (s *StepFunctionsServer) describe(w http.ResponseWriter, body []byte) {
	var in struct {
		ExecutionArn string `json:"executionArn"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		awsError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.findRun(func(x *run) bool { return x.id == in.ExecutionArn })
	if rn == nil {
		awsError(w, http.StatusBadRequest, "ExecutionDoesNotExist", "Execution Does Not Exist: '"+in.ExecutionArn+"'")
		return
	}
	ph := rn.read(time.Now().UTC())
	out := map[string]any{
		"executionArn": rn.id, "stateMachineArn": rn.target, "name": rn.key,
		"status":    [...]string{"RUNNING", "RUNNING", "SUCCEEDED", "FAILED"}[ph],
		"startDate": epoch(rn.created), "input": rn.input, "inputDetails": map[string]any{"included": true},
		"redriveCount": 0, "redriveStatus": "NOT_REDRIVABLE",
	}
	switch ph {
	case phaseSucceeded:
		out["stopDate"], out["output"], out["outputDetails"] = epoch(rn.ended), `{"ok":true}`, map[string]any{"included": true}
	case phaseFailed:
		msg := rn.outcome.Message
		if msg == "" {
			msg = "the task failed"
		}
		out["stopDate"], out["error"], out["cause"] = epoch(rn.ended), "States.TaskFailed", msg
		out["redriveStatus"] = "REDRIVABLE"
	}
	awsJSON(w, out)
}
