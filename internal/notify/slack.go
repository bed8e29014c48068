// Package notify puts approval requests in front of people in Slack and
// turns their button clicks into decisions.
//
// Requests wait in the store (package approvals keeps an outbox), so any
// process may create them and the Socket Mode listener (`dw approvals
// listen`) posts them, receives clicks without a public endpoint, and
// updates posted messages once a request is decided, escalated or expired.
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// Slack posts requests and handles clicks.
type Slack struct {
	api     *slack.Client
	svc     *approvals.Service
	cfg     *config.Config
	channel string
	hasApp  bool
	log     *slog.Logger
}

// New connects to Slack with the bot token (and the app-level token, for
// Socket Mode, when the config names one) from the environment.
func New(cfg *config.Config, svc *approvals.Service, log *slog.Logger) (*Slack, error) {
	if cfg.Slack == nil {
		return nil, errors.New("slack is not configured: add slack: with bot_token_env, app_token_env and channel to the config")
	}
	bot, err := config.Secret(cfg.Slack.BotTokenEnv, "slack.bot_token_env")
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	opts := []slack.Option{slack.OptionLog(slog.NewLogLogger(log.Handler(), slog.LevelDebug))}
	if cfg.Slack.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(cfg.Slack.APIURL))
	}
	hasApp := false
	if cfg.Slack.AppTokenEnv != "" {
		app, err := config.Secret(cfg.Slack.AppTokenEnv, "slack.app_token_env")
		if err != nil {
			return nil, err
		}
		opts = append(opts, slack.OptionAppLevelToken(app))
		hasApp = true
	}
	s := NewWithClient(slack.New(bot, opts...), cfg, svc, log)
	s.hasApp = hasApp
	return s, nil
}

// NewWithClient uses a prepared Slack client (tests point one at slacktest).
func NewWithClient(api *slack.Client, cfg *config.Config, svc *approvals.Service, log *slog.Logger) *Slack {
	if log == nil {
		log = slog.Default()
	}
	s := &Slack{api: api, svc: svc, cfg: cfg, log: log, hasApp: true}
	if cfg.Slack != nil {
		s.channel = cfg.Slack.Channel
	}
	return s
}

// FlushResult counts what Flush did.
type FlushResult struct {
	Posted    int `json:"posted"`
	Refreshed int `json:"refreshed"`
}

// Flush posts every request waiting in the outbox and updates the posted
// messages of requests that closed. A failed post is released for the
// next flush; the first error is returned after trying the rest.
func (s *Slack) Flush(ctx context.Context) (FlushResult, error) {
	var res FlushResult
	var firstErr error
	keep := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	notices, err := s.svc.ClaimNotices(ctx, 50)
	keep(err)
	for _, n := range notices {
		refs, err := s.post(ctx, n)
		if err != nil {
			s.log.Warn("slack: post approval request", "proposal", n.Proposal.ID, "err", err)
			keep(err)
			keep(s.svc.ReleaseNotice(ctx, n))
			continue
		}
		if err := s.svc.NoticePosted(ctx, n, "slack", refs); err != nil {
			keep(err)
			continue
		}
		res.Posted++
	}
	refreshes, err := s.svc.ClaimRefreshes(ctx, 50)
	keep(err)
	for _, n := range refreshes {
		blocks := OutcomeBlocks(s.cfg, n)
		failed := false
		for _, m := range n.Messages {
			if _, _, _, err := s.api.UpdateMessageContext(ctx, m.Channel, m.TS, slack.MsgOptionBlocks(blocks...),
				slack.MsgOptionText(fmt.Sprintf("%s is %s", n.Proposal.ID, n.Proposal.State), false)); err != nil {
				s.log.Warn("slack: update request message", "proposal", n.Proposal.ID, "channel", m.Channel, "err", err)
				keep(err)
				failed = true
			}
		}
		if failed {
			keep(s.svc.ReleaseRefresh(ctx, n))
			continue
		}
		res.Refreshed++
	}
	return res, firstErr
}

// post sends one request: a direct message with buttons to the approver,
// and the approval channel (mentioning the copied) with the same buttons,
// or, without a channel, an information copy to each copied person.
func (s *Slack) post(ctx context.Context, n approvals.Notice) ([]approvals.MessageRef, error) {
	var refs []approvals.MessageRef
	send := func(channel string, buttons bool) error {
		ch, ts, err := s.api.PostMessageContext(ctx, channel,
			slack.MsgOptionBlocks(RequestBlocks(s.cfg, n, buttons)...), slack.MsgOptionText(fallbackText(n), false))
		if err != nil {
			return fmt.Errorf("post %s to %s: %w", n.Proposal.ID, channel, err)
		}
		refs = append(refs, approvals.MessageRef{Channel: ch, TS: ts})
		return nil
	}
	if p, ok := s.cfg.Person(n.Approver); ok && p.SlackID != "" {
		if err := send(p.SlackID, true); err != nil {
			return refs, err
		}
	}
	if s.channel != "" {
		if err := send(s.channel, true); err != nil {
			return refs, err
		}
	} else {
		for _, id := range n.Proposal.Copied {
			if p, ok := s.cfg.Person(id); ok && p.SlackID != "" {
				if err := send(p.SlackID, false); err != nil {
					return refs, err
				}
			}
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("nowhere to post %s: approver %s has no slack_id and slack.channel is not set", n.Proposal.ID, n.Approver)
	}
	return refs, nil
}

// Reply is what a click came to, as told to the person who clicked.
type Reply struct {
	ProposalID string            `json:"proposal_id,omitempty"`
	Verdict    approvals.Verdict `json:"verdict,omitempty"`
	// Decided is true when the click recorded a decision.
	Decided bool   `json:"decided"`
	Text    string `json:"text"`
}

// HandleInteraction processes a block_actions callback from an Approve or
// Reject button: the Slack user is resolved to a person and the decision
// goes through approvals.Decide, which refuses anyone but the named
// approver and a proposal already decided. The clicker is told the
// outcome in an ephemeral message; a recorded decision also updates the
// posted requests.
func (s *Slack) HandleInteraction(ctx context.Context, cb slack.InteractionCallback) Reply {
	if cb.Type != slack.InteractionTypeBlockActions {
		return Reply{Text: fmt.Sprintf("ignored %s interaction", cb.Type)}
	}
	var verdict approvals.Verdict
	var id string
	var action *slack.BlockAction
	for _, a := range cb.ActionCallback.BlockActions {
		if v, pid, ok := ParseActionID(a.ActionID); ok {
			verdict, id, action = v, pid, a
			break
		}
	}
	if action == nil {
		return Reply{Text: "ignored: no Data Workers approval button in this interaction"}
	}
	r := Reply{ProposalID: id, Verdict: verdict}
	if action.Value != id {
		r.Text = fmt.Sprintf("Refused: the button's value %q does not match proposal %s; nothing was recorded.", action.Value, id)
		s.tell(ctx, cb, r.Text)
		return r
	}
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	msgTS := cb.Container.MessageTs
	if msgTS == "" {
		msgTS = cb.Message.Timestamp
	}
	by, err := approvals.SlackDecider(s.cfg, cb.User.ID, map[string]string{
		"slack_team": cb.Team.ID, "slack_channel": channel, "message_ts": msgTS, "action_ts": action.ActionTs,
		"slack_user_name": cb.User.Name, "block_id": action.BlockID,
	})
	if err != nil {
		r.Text = fmt.Sprintf("Refused: your Slack account is not mapped to a person in the Data Workers config, so it cannot decide %s.%s", id, s.whoDecides(ctx, id))
		s.tell(ctx, cb, r.Text)
		return r
	}
	p, err := s.svc.Decide(ctx, id, by, verdict, "")
	var na *approvals.NotApproverError
	var de *approvals.DecidedError
	switch {
	case errors.As(err, &na):
		r.Text = "Refused: " + na.Error() + ". Nothing was recorded."
	case errors.As(err, &de):
		r.Text = de.Error() + "."
	case errors.Is(err, approvals.ErrNotFound):
		r.Text = fmt.Sprintf("Refused: there is no proposal %s in this Data Workers store.", id)
	case err != nil:
		s.log.Error("slack: record decision", "proposal", id, "err", err)
		r.Text = fmt.Sprintf("Your decision on %s could not be recorded (%v); try again or use `dw %s %s`.", id, err, verdict, id)
	default:
		r.Decided = true
		verb := "approved"
		if verdict == approvals.VerdictReject {
			verb = "rejected"
		}
		r.Text = fmt.Sprintf("You %s %s: %s. Recorded in receipt %s.", verb, p.ID, approvals.Line(p.What), p.ReceiptID)
	}
	s.tell(ctx, cb, r.Text)
	if r.Decided {
		if _, err := s.Flush(ctx); err != nil {
			s.log.Warn("slack: update messages after decision", "proposal", id, "err", err)
		}
	}
	return r
}

func (s *Slack) whoDecides(ctx context.Context, id string) string {
	p, err := s.svc.Get(ctx, id)
	if err != nil || !p.State.Open() {
		return ""
	}
	var names []string
	for _, pid := range approvals.MayDecide(*p) {
		names = append(names, mention(s.cfg, pid))
	}
	return " Only " + strings.Join(names, " or ") + " may."
}

// tell answers the clicker privately.
func (s *Slack) tell(ctx context.Context, cb slack.InteractionCallback, text string) {
	channel := cb.Channel.ID
	if channel == "" {
		channel = cb.Container.ChannelID
	}
	if channel == "" || cb.User.ID == "" {
		return
	}
	if _, err := s.api.PostEphemeralContext(ctx, channel, cb.User.ID, slack.MsgOptionText(text, false)); err != nil {
		s.log.Warn("slack: reply to clicker", "user", cb.User.ID, "err", err)
	}
}

// Acker acknowledges a Socket Mode envelope (a *socketmode.Client).
type Acker interface {
	Ack(req socketmode.Request, payload ...any) error
}

// HandleEvent processes one Socket Mode event. Envelopes are acknowledged
// first, because Slack retries any envelope not acknowledged within three
// seconds, and a retried click must not be processed twice.
func (s *Slack) HandleEvent(ctx context.Context, ack Acker, evt socketmode.Event) *Reply {
	if evt.Request != nil && evt.Request.EnvelopeID != "" {
		if err := ack.Ack(*evt.Request); err != nil {
			s.log.Warn("slack: acknowledge envelope", "envelope", evt.Request.EnvelopeID, "err", err)
		}
	}
	switch evt.Type {
	case socketmode.EventTypeInteractive:
		cb, ok := evt.Data.(slack.InteractionCallback)
		if !ok {
			s.log.Warn("slack: interactive event without a callback", "data", fmt.Sprintf("%T", evt.Data))
			return nil
		}
		r := s.HandleInteraction(ctx, cb)
		s.log.Info("slack: interaction", "proposal", r.ProposalID, "verdict", r.Verdict, "decided", r.Decided, "reply", r.Text)
		return &r
	case socketmode.EventTypeConnecting, socketmode.EventTypeConnected, socketmode.EventTypeHello:
		s.log.Info("slack: socket mode", "event", evt.Type)
	case socketmode.EventTypeConnectionError, socketmode.EventTypeInvalidAuth, socketmode.EventTypeIncomingError:
		s.log.Warn("slack: socket mode", "event", evt.Type, "data", fmt.Sprint(evt.Data))
	}
	return nil
}

// Listen runs the Socket Mode listener until ctx ends: clicks are handled
// as they come, and every interval expiries are swept and the outbox is
// flushed, so escalations reach the next approver without a daemon of
// their own.
func (s *Slack) Listen(ctx context.Context, every time.Duration) error {
	if !s.hasApp {
		return errors.New("slack.app_token_env is not set: Socket Mode needs an app-level token (xapp-…) with connections:write")
	}
	if every <= 0 {
		every = 30 * time.Second
	}
	client := socketmode.New(s.api, socketmode.OptionLog(slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- client.RunContext(ctx) }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	s.housekeep(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("slack socket mode: %w", err)
		case evt := <-client.Events:
			s.HandleEvent(ctx, client, evt)
		case <-tick.C:
			s.housekeep(ctx)
		}
	}
}

func (s *Slack) housekeep(ctx context.Context) {
	esc, err := s.svc.Sweep(ctx)
	if err != nil {
		s.log.Error("approvals: sweep", "err", err)
	}
	for _, e := range esc {
		s.log.Info("approvals: request expired", "proposal", e.ProposalID, "from", e.From, "to", e.To, "expired", e.Expired)
	}
	res, err := s.Flush(ctx)
	if err != nil {
		s.log.Warn("slack: flush", "err", err)
	}
	if res.Posted+res.Refreshed > 0 {
		s.log.Info("slack: flushed", "posted", res.Posted, "refreshed", res.Refreshed)
	}
}
