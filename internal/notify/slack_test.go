package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slacktest"
	"github.com/slack-go/slack/socketmode"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

const testConfig = `
slack:
  bot_token_env: DW_TEST_SLACK_BOT
  app_token_env: DW_TEST_SLACK_APP
  channel: C0APPROVALS
people:
  - {id: alice, name: Alice Stream, slack_id: U0ALICE, os_users: [alice]}
  - {id: bob, name: Bob Billing, slack_id: U0BOB, os_users: [bob]}
  - {id: carol, name: Carol Delegate, slack_id: U0CAROL}
  - {id: dave, name: Dave Bystander, slack_id: U0DAVE}
domains:
  - name: billing
    assets: ["airflow://dag/*", "snowflake://usage.*"]
    owners: [bob]
    approvers: [bob, carol]
    copy: [alice]
    approval_expiry: 1h
`

var t0 = time.Date(2026, 3, 10, 15, 5, 0, 0, time.UTC)

// message is one call the fake Slack received.
type message struct {
	Method, Channel, User, TS, Text string
	Blocks                          slack.Blocks
}

// fakeSlack is slacktest with the three chat methods recorded, so tests
// can read the exact Block Kit payloads the client sent.
type fakeSlack struct {
	*slacktest.Server
	t    *testing.T
	mu   sync.Mutex
	seen []message
	n    int
}

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{t: t}
	f.Server = slacktest.NewTestServer(func(c slacktest.Customize) {
		for _, m := range []string{"chat.postMessage", "chat.postEphemeral", "chat.update"} {
			c.Handle("/"+m, f.record(m))
		}
	})
	f.Start()
	t.Cleanup(f.Stop)
	return f
}

func (f *fakeSlack) record(method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := message{Method: method, Channel: r.FormValue("channel"), User: r.FormValue("user"), TS: r.FormValue("ts"), Text: r.FormValue("text")}
		if b := r.FormValue("blocks"); b != "" {
			// Slack refuses a message over any Block Kit limit with
			// invalid_blocks; so does the fake, and the test fails.
			if bad := blockKitViolations([]byte(b)); len(bad) > 0 {
				f.t.Errorf("%s: Slack would answer invalid_blocks: %s", method, strings.Join(bad, "; "))
				_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_blocks"})
				return
			}
			if err := json.Unmarshal([]byte(b), &m.Blocks); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		f.mu.Lock()
		f.n++
		if m.TS == "" {
			m.TS = fmt.Sprintf("1773155100.%06d", f.n)
		}
		f.seen = append(f.seen, m)
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": m.Channel, "ts": m.TS, "message_ts": m.TS})
	}
}

func (f *fakeSlack) calls(method string) []message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []message
	for _, m := range f.seen {
		if m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

type env struct {
	svc   *approvals.Service
	slack *Slack
	fake  *fakeSlack
	clk   *clock.Fake
	cfg   *config.Config
}

func setup(t *testing.T, db *store.DB) *env {
	t.Helper()
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	svc := approvals.New(db, cfg, clk, nil)
	fake := newFakeSlack(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(fake.GetAPIURL()), slack.OptionAppLevelToken("xapp-test"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &env{svc: svc, slack: NewWithClient(api, cfg, svc, log), fake: fake, clk: clk, cfg: cfg}
}

func (e *env) propose(t *testing.T) *approvals.Proposal {
	t.Helper()
	p, err := e.svc.Propose(context.Background(), approvals.NewProposal{
		IncidentID: "INC-7", Kind: approvals.KindHold,
		What:    "Pause sync_metered_usage_to_stripe",
		Why:     "egress_bytes is null in 18% of today's rows & climbing",
		Targets: []string{"airflow://dag/sync_metered_usage_to_stripe"},
		Scope:   []string{"stripe invoices", "sigma://workbook/revenue-today"},
		Undo:    "unpause the DAG", Proposer: "dw-incidents",
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func blockText(blocks slack.Blocks) string {
	raw, _ := json.Marshal(blocks)
	return string(raw)
}

// buttons finds the action block's buttons in posted blocks.
func buttons(t *testing.T, blocks slack.Blocks) (string, []*slack.ButtonBlockElement) {
	t.Helper()
	for _, b := range blocks.BlockSet {
		if a, ok := b.(*slack.ActionBlock); ok {
			var out []*slack.ButtonBlockElement
			for _, el := range a.Elements.ElementSet {
				if btn, ok := el.(*slack.ButtonBlockElement); ok {
					out = append(out, btn)
				}
			}
			return a.BlockID, out
		}
	}
	return "", nil
}

// click is the block_actions payload Slack sends when a user presses a
// posted button, parsed the way slack-go parses it from Socket Mode.
func click(t *testing.T, user, channel, messageTS, blockID string, btn *slack.ButtonBlockElement) slack.InteractionCallback {
	t.Helper()
	payload := fmt.Sprintf(`{
		"type": "block_actions",
		"user": {"id": %q, "username": "u", "name": "u", "team_id": "T0ACME"},
		"api_app_id": "A0DW", "token": "legacy", "trigger_id": "1.2.3",
		"container": {"type": "message", "message_ts": %q, "channel_id": %q, "is_ephemeral": false},
		"team": {"id": "T0ACME", "domain": "acme"},
		"channel": {"id": %q, "name": "approvals"},
		"message": {"type": "message", "ts": %q, "text": "Approval needed"},
		"response_url": "https://hooks.slack.com/actions/T0ACME/1/x",
		"state": {"values": {}},
		"actions": [{"action_id": %q, "block_id": %q, "value": %q, "style": %q, "type": "button",
			"text": {"type": "plain_text", "text": %q}, "action_ts": "1773155200.000100"}]
	}`, user, messageTS, channel, channel, messageTS, btn.ActionID, blockID, btn.Value, btn.Style, btn.Text.Text)
	var cb slack.InteractionCallback
	if err := json.Unmarshal([]byte(payload), &cb); err != nil {
		t.Fatalf("parse interaction payload: %v", err)
	}
	return cb
}

func TestFlushPostsBlockKitRequest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := setup(t, db)
		p := e.propose(t)
		res, err := e.slack.Flush(ctx)
		if err != nil || res.Posted != 1 {
			t.Fatalf("flush: %+v, %v", res, err)
		}
		posts := e.fake.calls("chat.postMessage")
		if len(posts) != 2 || posts[0].Channel != "U0BOB" || posts[1].Channel != "C0APPROVALS" {
			t.Fatalf("posts %+v; want a DM to the approver and the approval channel", posts)
		}
		for _, m := range posts {
			text := blockText(m.Blocks)
			for _, want := range []string{
				"Approval needed: Pause sync_metered_usage_to_stripe",
				"*Why*\\negress_bytes is null in 18% of today's rows \\u0026amp; climbing",
				"*Blast radius*\\n• stripe invoices\\n• sigma://workbook/revenue-today",
				"*Undo*\\nunpause the DAG",
				"*Expires*\\n\\u003c!date^" + fmt.Sprint(t0.Add(time.Hour).Unix()),
				"2026-03-10 16:05 UTC",
				"Approver: \\u003c@U0BOB\\u003e (Bob Billing)",
				"*Copied*\\n\\u003c@U0ALICE\\u003e (Alice Stream)",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("%s: blocks lack %s\n%s", m.Channel, want, text)
				}
			}
			blockID, btns := buttons(t, m.Blocks)
			if blockID != "dw_decide:"+p.ID+":r0" || len(btns) != 2 {
				t.Fatalf("action block %q with %d buttons", blockID, len(btns))
			}
			if btns[0].ActionID != "dw_approve:"+p.ID || btns[0].Value != p.ID || btns[0].Style != slack.StylePrimary || btns[0].Text.Text != "Approve" || btns[0].Confirm == nil {
				t.Errorf("approve button %+v", btns[0])
			}
			if btns[1].ActionID != "dw_reject:"+p.ID || btns[1].Value != p.ID || btns[1].Style != slack.StyleDanger || btns[1].Text.Text != "Reject" {
				t.Errorf("reject button %+v", btns[1])
			}
			if !strings.Contains(m.Text, "Approval needed for "+p.ID) {
				t.Errorf("fallback text %q", m.Text)
			}
		}
		if res, _ := e.slack.Flush(ctx); res.Posted != 0 {
			t.Errorf("posted again: %+v", res)
		}
		doc, _ := approvals.Receipt(ctx, db, "INC-7")
		if last := doc.Entries[len(doc.Entries)-1]; last.Kind != approvals.EntryNotified || !strings.Contains(string(last.Payload), "C0APPROVALS") {
			t.Errorf("receipt lacks the posting: %+v", last)
		}
	})
}

func TestApproverClickDecidesAndUpdatesMessages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := setup(t, db)
		p := e.propose(t)
		if _, err := e.slack.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		dm := e.fake.calls("chat.postMessage")[0]
		blockID, btns := buttons(t, dm.Blocks)
		r := e.slack.HandleInteraction(ctx, click(t, "U0BOB", "D0BOB", dm.TS, blockID, btns[0]))
		if !r.Decided || r.Verdict != approvals.VerdictApprove || !strings.Contains(r.Text, "You approved "+p.ID) {
			t.Fatalf("reply %+v", r)
		}
		got, _ := e.svc.Get(ctx, p.ID)
		d := got.Decision
		if got.State != approvals.StateApproved || d.PersonID != "bob" || d.Channel != approvals.ChannelSlack ||
			d.Evidence["slack_user"] != "U0BOB" || d.Evidence["message_ts"] != dm.TS || d.Evidence["slack_team"] != "T0ACME" || d.Evidence["block_id"] != blockID {
			t.Errorf("decision %+v", d)
		}
		eph := e.fake.calls("chat.postEphemeral")
		if len(eph) != 1 || eph[0].User != "U0BOB" || eph[0].Channel != "D0BOB" || !strings.Contains(eph[0].Text, "You approved") {
			t.Errorf("ephemeral reply %+v", eph)
		}
		ups := e.fake.calls("chat.update")
		if len(ups) != 2 {
			t.Fatalf("updates %+v; want both posted messages", ups)
		}
		for _, u := range ups {
			if _, btns := buttons(t, u.Blocks); btns != nil || !strings.Contains(blockText(u.Blocks), "Approved: Pause sync_metered_usage_to_stripe") {
				t.Errorf("updated message still offers buttons or lacks the outcome: %s", blockText(u.Blocks))
			}
		}
		// A second click on the decided request is told so and changes nothing.
		r = e.slack.HandleInteraction(ctx, click(t, "U0BOB", "D0BOB", dm.TS, blockID, btns[1]))
		if r.Decided || !strings.Contains(r.Text, "already decided: approved by bob via slack") {
			t.Errorf("second click: %+v", r)
		}
		if got, _ := e.svc.Get(ctx, p.ID); got.State != approvals.StateApproved {
			t.Errorf("state %s after second click", got.State)
		}
	})
}

func TestClicksByOthersAreRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := setup(t, db)
		p := e.propose(t)
		if _, err := e.slack.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		ch := e.fake.calls("chat.postMessage")[1]
		blockID, btns := buttons(t, ch.Blocks)
		cases := []struct {
			user string
			btn  *slack.ButtonBlockElement
			want string
		}{
			{"U0DAVE", btns[0], "Refused: dave may not decide " + p.ID + ": only the named approver bob may"},
			{"U0CAROL", btns[0], "Refused: carol may not decide"}, // next in line, but not before escalation
			{"U0NOBODY", btns[1], "not mapped to a person in the Data Workers config, so it cannot decide " + p.ID + ". Only <@U0BOB> (Bob Billing) may."},
			{"U0BOB", &slack.ButtonBlockElement{ActionID: btns[0].ActionID, Value: "P-OTHER000", Text: btns[0].Text}, "does not match proposal"},
		}
		for _, c := range cases {
			r := e.slack.HandleInteraction(ctx, click(t, c.user, "C0APPROVALS", ch.TS, blockID, c.btn))
			if r.Decided || !strings.Contains(r.Text, c.want) {
				t.Errorf("%s: %+v, want %q", c.user, r, c.want)
			}
		}
		if got, _ := e.svc.Get(ctx, p.ID); got.State != approvals.StatePending || got.Decision != nil {
			t.Errorf("refused clicks changed the proposal: %+v", got)
		}
		if eph := e.fake.calls("chat.postEphemeral"); len(eph) != len(cases) || eph[0].User != "U0DAVE" {
			t.Errorf("each clicker must be told: %+v", eph)
		}
		if len(e.fake.calls("chat.update")) != 0 {
			t.Error("messages updated without a decision")
		}
		unknown := &slack.ButtonBlockElement{ActionID: "dw_approve:P-NOSUCH00", Value: "P-NOSUCH00", Text: btns[0].Text}
		if r := e.slack.HandleInteraction(ctx, click(t, "U0BOB", "C0APPROVALS", ch.TS, blockID, unknown)); r.Decided || !strings.Contains(r.Text, "no proposal P-NOSUCH00") {
			t.Errorf("unknown proposal: %+v", r)
		}
		other := &slack.ButtonBlockElement{ActionID: "someone_elses_button", Value: "x", Text: btns[0].Text}
		if r := e.slack.HandleInteraction(ctx, click(t, "U0BOB", "C0APPROVALS", ch.TS, blockID, other)); r.Decided || r.ProposalID != "" {
			t.Errorf("foreign button: %+v", r)
		}
	})
}

func TestTwoApproversClickAtOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := setup(t, db)
		p := e.propose(t)
		if _, err := e.slack.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Hour) // escalated to carol; bob may still decide
		if _, err := e.slack.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		posts := e.fake.calls("chat.postMessage")
		if len(posts) != 4 {
			t.Fatalf("posts %d; want bob's and carol's requests, each DM and channel", len(posts))
		}
		if !strings.Contains(blockText(posts[2].Blocks), "Escalated: no answer from \\u003c@U0BOB\\u003e") || posts[2].Channel != "U0CAROL" {
			t.Errorf("escalated request: %s to %s", blockText(posts[2].Blocks), posts[2].Channel)
		}
		if ups := e.fake.calls("chat.update"); len(ups) != 2 || !strings.Contains(blockText(ups[0].Blocks), "now decides") {
			t.Errorf("bob's old messages not marked escalated: %+v", ups)
		}
		blockID, btns := buttons(t, posts[3].Blocks)
		replies := make([]Reply, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, u := range []string{"U0BOB", "U0CAROL"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				replies[i] = e.slack.HandleInteraction(ctx, click(t, u, "C0APPROVALS", posts[3].TS, blockID, btns[i]))
			}()
		}
		close(start)
		wg.Wait()
		if replies[0].Decided == replies[1].Decided {
			t.Fatalf("replies %+v; want exactly one decision", replies)
		}
		loser := replies[0]
		if loser.Decided {
			loser = replies[1]
		}
		if !strings.Contains(loser.Text, p.ID+" is already decided") {
			t.Errorf("the other clicker was told %q", loser.Text)
		}
	})
}

type ackRecorder struct {
	mu  sync.Mutex
	ids []string
}

func (a *ackRecorder) Ack(req socketmode.Request, _ ...any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ids = append(a.ids, req.EnvelopeID)
	return nil
}

func TestHandleEventAcksThenDecides(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := setup(t, db)
		p := e.propose(t)
		if _, err := e.slack.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		dm := e.fake.calls("chat.postMessage")[0]
		blockID, btns := buttons(t, dm.Blocks)
		cb := click(t, "U0BOB", "D0BOB", dm.TS, blockID, btns[1])
		ack := &ackRecorder{}
		r := e.slack.HandleEvent(ctx, ack, socketmode.Event{Type: socketmode.EventTypeInteractive, Data: cb,
			Request: &socketmode.Request{Type: socketmode.RequestTypeInteractive, EnvelopeID: "env-1"}})
		if r == nil || !r.Decided || r.Verdict != approvals.VerdictReject || strings.Join(ack.ids, ",") != "env-1" {
			t.Fatalf("reply %+v, acks %v", r, ack.ids)
		}
		if got, _ := e.svc.Get(ctx, p.ID); got.State != approvals.StateRejected {
			t.Errorf("state %s, want rejected", got.State)
		}
		// Other envelopes are acknowledged and otherwise ignored.
		if r := e.slack.HandleEvent(ctx, ack, socketmode.Event{Type: socketmode.EventTypeSlashCommand, Data: slack.SlashCommand{},
			Request: &socketmode.Request{Type: socketmode.RequestTypeSlashCommands, EnvelopeID: "env-2"}}); r != nil || len(ack.ids) != 2 {
			t.Errorf("slash command: %+v, acks %v", r, ack.ids)
		}
	})
}

// TestSocketModeListenerOverSlacktest runs the real socketmode client
// against slacktest: apps.connections.open hands out slacktest's websocket,
// the interactive envelope travels over it, and the acknowledgement comes
// back over it.
func TestSocketModeListenerOverSlacktest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		e := setup(t, db)
		p := e.propose(t)
		acks := make(chan string, 8)
		go func() {
			for {
				select {
				case m := <-e.fake.SeenFeed:
					acks <- m
				case <-ctx.Done():
					return
				}
			}
		}()
		done := make(chan error, 1)
		go func() { done <- e.slack.Listen(ctx, time.Hour) }()

		// Listen flushes the outbox when it starts.
		var dm message
		for dm.TS == "" {
			if posts := e.fake.calls("chat.postMessage"); len(posts) > 0 {
				dm = posts[0]
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("the listener never posted the request")
			case <-time.After(20 * time.Millisecond):
			}
		}
		blockID, btns := buttons(t, dm.Blocks)
		cb := click(t, "U0BOB", "D0BOB", dm.TS, blockID, btns[0])
		payload, err := json.Marshal(&cb)
		if err != nil {
			t.Fatal(err)
		}
		envelope, _ := json.Marshal(map[string]any{"type": "interactive", "envelope_id": "env-42", "payload": json.RawMessage(payload), "accepts_response_payload": false})
		e.fake.SendToWebsocket(string(envelope))

		select {
		case a := <-acks:
			if !strings.Contains(a, `"envelope_id":"env-42"`) {
				t.Errorf("ack %s", a)
			}
		case <-ctx.Done():
			t.Fatal("no acknowledgement came back over the websocket")
		}
		for {
			got, err := e.svc.Get(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State == approvals.StateApproved {
				if got.Decision.Evidence["slack_user"] != "U0BOB" {
					t.Errorf("evidence %+v", got.Decision.Evidence)
				}
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the click over Socket Mode was not recorded; state %s", got.State)
			case <-time.After(20 * time.Millisecond):
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listen: %v", err)
		}
	})
}

func TestNewNeedsConfiguredTokens(t *testing.T) {
	t.Setenv("DW_HOME", t.TempDir())
	cfg, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(&config.Config{}, nil, nil); err == nil || !strings.Contains(err.Error(), "slack is not configured") {
		t.Errorf("no slack section: %v", err)
	}
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "DW_TEST_SLACK_BOT") {
		t.Errorf("bot token unset: %v", err)
	}
	t.Setenv("DW_TEST_SLACK_BOT", "xoxb-1")
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "DW_TEST_SLACK_APP") {
		t.Errorf("app token unset: %v", err)
	}
	t.Setenv("DW_TEST_SLACK_APP", "xapp-1")
	if s, err := New(cfg, nil, nil); err != nil || !s.hasApp || s.channel != "C0APPROVALS" {
		t.Errorf("configured: %+v, %v", s, err)
	}
	noApp := *cfg.Slack
	noApp.AppTokenEnv = ""
	cfg.Slack = &noApp
	s, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(context.Background(), time.Second); err == nil || !strings.Contains(err.Error(), "app-level token") {
		t.Errorf("listen without app token: %v", err)
	}
}

func TestParseActionID(t *testing.T) {
	for _, c := range []struct {
		id   string
		v    approvals.Verdict
		p    string
		okay bool
	}{
		{"dw_approve:P-ABCDEFGH", approvals.VerdictApprove, "P-ABCDEFGH", true},
		{"dw_reject:P-ABCDEFGH", approvals.VerdictReject, "P-ABCDEFGH", true},
		{"dw_approve:", "", "", false},
		{"approve", "", "", false},
	} {
		v, p, ok := ParseActionID(c.id)
		if v != c.v || p != c.p || ok != c.okay {
			t.Errorf("ParseActionID(%q) = %s %s %v", c.id, v, p, ok)
		}
		if ok && ActionID(v, p) != c.id {
			t.Errorf("ActionID round trip for %q", c.id)
		}
	}
}
