package orchestrate

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestUpstreamKeyFitsEverySystem(t *testing.T) {
	allowed := regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)
	seen := map[string]string{}
	for _, c := range []struct{ key, label string }{
		{"P-7K3M9QXA/airflow/sync", "P-7K3M9QXA"},
		{"P-7K3M9QXA/airflow/sync2", "P-7K3M9QXA"},
		{"open/rerun/INC 12: egress façade rerun that has a very long name indeed/dbt_cloud/1", "INC 12: egress façade rerun that has a very long name indeed"},
		{"open/rerun/x/step_functions/arn:aws:states:us-east-1:123456789012:stateMachine:a", "x"},
	} {
		k := upstreamKey(c.key, c.label)
		if !allowed.MatchString(k) || !strings.HasPrefix(k, "dw-") {
			t.Errorf("upstreamKey(%q) = %q: not a valid execution name / dag_run_id", c.key, k)
		}
		if prev, dup := seen[k]; dup {
			t.Errorf("%q and %q share upstream key %q", prev, c.key, k)
		}
		seen[k] = c.key
		if upstreamKey(c.key, c.label) != k {
			t.Errorf("upstreamKey is not stable for %q", c.key)
		}
	}
}

func TestDBTCauseKeepsTheMarker(t *testing.T) {
	key := "dw-P-7K3M9QXA-0123456789abcdef"
	for _, reason := range []string{"", "short", strings.Repeat("é", 300), strings.Repeat("x", 254)} {
		c := dbtCause(reason, key)
		if len(c) > dbtCauseMax || !strings.HasSuffix(c, " ["+key+"]") || !utf8.ValidString(c) {
			t.Errorf("dbtCause(%d bytes) = %q (%d bytes)", len(reason), c, len(c))
		}
	}
}

func TestExecutionARN(t *testing.T) {
	for sm, want := range map[string]string{
		"arn:aws:states:us-east-1:123456789012:stateMachine:usage":      "arn:aws:states:us-east-1:123456789012:execution:usage:run-1",
		"arn:aws:states:us-east-1:123456789012:stateMachine:usage:prod": "arn:aws:states:us-east-1:123456789012:execution:usage:run-1",
	} {
		if got := executionARN(sm, "run-1"); got != want {
			t.Errorf("executionARN(%s) = %s", sm, got)
		}
	}
}

func TestStatesMapEverySystemWord(t *testing.T) {
	cases := map[State][]State{
		StateQueued:    {dagsterState("QUEUED"), dagsterState("NOT_STARTED"), airflowState("queued"), dbtState(1), dbtState(2)},
		StateRunning:   {dagsterState("STARTED"), dagsterState("CANCELING"), airflowState("running"), dbtState(3), sfnState("RUNNING"), sfnState("PENDING_REDRIVE")},
		StateSucceeded: {dagsterState("SUCCESS"), airflowState("success"), dbtState(10), sfnState("SUCCEEDED")},
		StateFailed:    {dagsterState("FAILURE"), airflowState("failed"), dbtState(20), sfnState("FAILED"), sfnState("TIMED_OUT")},
		StateCanceled:  {dagsterState("CANCELED"), dbtState(30), sfnState("ABORTED")},
		StateUnknown:   {dagsterState("NEW_STATE"), airflowState("restarting"), dbtState(99), sfnState("LATER")},
	}
	for want, got := range cases {
		for i, g := range got {
			if g != want {
				t.Errorf("%s case %d mapped to %s", want, i, g)
			}
		}
	}
	if StateUnknown.Terminal() || !StateCanceled.Terminal() {
		t.Error("terminal states wrong")
	}
}
