package incidents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/deps"
	"github.com/dataworkers/dw/internal/mcpserver"
)

// confirmSetup makes one pending proposal whose named approver is the OS
// user running the test, and serves the agent to a client whose user
// answers the confirmation form with answer (nil: a client that cannot ask).
func confirmSetup(t *testing.T, answer func() (*mcp.ElicitResult, error)) (*mcp.ClientSession, *approvals.Service, string) {
	t.Helper()
	ctx := context.Background()
	yaml := "home: " + t.TempDir() + "\npeople:\n  - {id: sam, name: Sam Okafor, os_users: [\"" + config.CurrentOSUser() + "\"]}\n" +
		"domains:\n  - name: streaming\n    assets: [\"airflow://**\"]\n    owners: [sam]\n"
	cfg, err := config.Parse("dw.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	d := deps.New(Name, cfg, clock.NewFake(time.Date(2026, 3, 10, 15, 10, 0, 0, time.UTC)), nil)
	t.Cleanup(func() { d.Close() })
	db, err := d.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	svc := approvals.New(db, cfg, d.Clock, nil)
	p, err := svc.Propose(ctx, approvals.NewProposal{Kind: "hold", What: "Pause the Stripe sync", Why: "bytes are null",
		Targets: []string{"airflow://dag/sync"}, Undo: "unpause it", Proposer: Name})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Agent{Name: Name, Instructions: "x", Register: func(m *mcpserver.Server) error { Register(m, d); return nil }}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	opts := &mcp.ClientOptions{}
	if answer != nil {
		opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return answer() }
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, svc, p.ID
}

func TestApproverConfirmsInClient(t *testing.T) {
	cs, svc, id := confirmSetup(t, func() (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve", "reason": "checked"}}, nil
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "request_confirmation", Arguments: map[string]any{"proposal": id}})
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	p, err := svc.Get(context.Background(), id)
	if err != nil || p.State != approvals.StateApproved {
		t.Fatalf("state %v, %v", p.State, err)
	}
}

// TestConfirmFailsClosed: a decline, an error or a client that cannot ask
// records nothing.
func TestConfirmFailsClosed(t *testing.T) {
	for name, answer := range map[string]func() (*mcp.ElicitResult, error){
		"decline": func() (*mcp.ElicitResult, error) { return &mcp.ElicitResult{Action: "decline"}, nil },
		"cancel":  func() (*mcp.ElicitResult, error) { return &mcp.ElicitResult{Action: "cancel"}, nil },
		"no field": func() (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		},
		"cannot": nil,
	} {
		t.Run(name, func(t *testing.T) {
			cs, svc, id := confirmSetup(t, answer)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "request_confirmation", Arguments: map[string]any{"proposal": id}})
			if err == nil && res.IsError {
				t.Logf("refused: %v", res.Content[0].(*mcp.TextContent).Text)
			}
			p, gerr := svc.Get(context.Background(), id)
			if gerr != nil || p.State != approvals.StatePending {
				t.Fatalf("%s: state %v (%v); a %s must never approve", name, p.State, gerr, name)
			}
			if err == nil && !res.IsError && strings.Contains(strings.ToLower(res.Content[0].(*mcp.TextContent).Text), "approved p-") {
				t.Errorf("claims approval: %v", res.Content[0])
			}
		})
	}
}
