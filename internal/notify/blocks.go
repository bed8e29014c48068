package notify

import (
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
)

// Action ids of the two buttons carry the proposal id, so a click names
// what it decides without any state in the listener.
const (
	approvePrefix = "dw_approve:"
	rejectPrefix  = "dw_reject:"
)

// ActionID is the button action id for a verdict on a proposal.
func ActionID(v approvals.Verdict, proposalID string) string {
	if v == approvals.VerdictApprove {
		return approvePrefix + proposalID
	}
	return rejectPrefix + proposalID
}

// ParseActionID reads a button action id; ok is false for other actions.
func ParseActionID(id string) (v approvals.Verdict, proposalID string, ok bool) {
	if p, found := strings.CutPrefix(id, approvePrefix); found && p != "" {
		return approvals.VerdictApprove, p, true
	}
	if p, found := strings.CutPrefix(id, rejectPrefix); found && p != "" {
		return approvals.VerdictReject, p, true
	}
	return "", "", false
}

// Slack's limits: a header is at most 150 characters, a field 2000.
const (
	maxHeader  = 150
	maxField   = 2000
	maxSection = 3000
)

// RequestBlocks is the Block Kit request: what, why, blast radius, undo,
// expiry, who decides and every field of the action the approval allows
// (or that it allows none); with buttons it also carries Approve and
// Reject.
func RequestBlocks(cfg *config.Config, n approvals.Notice, buttons bool) []slack.Block {
	p := n.Proposal
	intro := fmt.Sprintf("*%s* · `%s` in *%s* · proposed by %s\nApprover: %s", p.ID, p.Kind, esc(p.Domain), esc(p.Proposer), mention(cfg, n.Approver))
	if n.Previous != "" {
		intro += fmt.Sprintf("\nEscalated: no answer from %s in time.", mention(cfg, n.Previous))
	}
	blast := "the targets only"
	if len(p.Scope) > 0 {
		blast = bullets(p.Scope)
	}
	fields := []*slack.TextBlockObject{
		mrkdwn("*Why*\n" + esc(approvals.Text(p.Why, ""))),
		mrkdwn("*Blast radius*\n" + blast),
		mrkdwn("*Undo*\n" + esc(approvals.Text(p.Undo, ""))),
		mrkdwn("*Expires*\n" + slackDate(p.ExpiresAt) + "\nthen it escalates; never granted by default"),
		mrkdwn("*Targets*\n" + bullets(p.Targets)),
	}
	if len(p.Copied) > 0 {
		var cc []string
		for _, id := range p.Copied {
			cc = append(cc, mention(cfg, id))
		}
		fields = append(fields, mrkdwn("*Copied*\n"+strings.Join(cc, ", ")))
	}
	blocks := []slack.Block{
		slack.NewHeaderBlock(plain("Approval needed: " + approvals.Line(p.What))),
		slack.NewSectionBlock(mrkdwn(intro), nil, nil),
		slack.NewSectionBlock(nil, fields, nil),
	}
	blocks = append(blocks, actionBlocks(p.Action)...)
	if p.Class == approvals.ClassLive {
		blocks = append(blocks, slack.NewContextBlock("", mrkdwn("Live data stack change: only the asset owner may approve, never a delegate.")))
	}
	if buttons {
		approve := slack.NewButtonBlockElement(ActionID(approvals.VerdictApprove, p.ID), p.ID, plain("Approve")).
			WithStyle(slack.StylePrimary).
			WithConfirm(slack.NewConfirmationBlockObject(plain("Approve "+p.ID+"?"),
				mrkdwn(esc(approvals.Line(p.What))+"\nUndo: "+esc(approvals.Text(p.Undo, ""))), plain("Approve"), plain("Cancel")))
		reject := slack.NewButtonBlockElement(ActionID(approvals.VerdictReject, p.ID), p.ID, plain("Reject")).
			WithStyle(slack.StyleDanger)
		blocks = append(blocks, slack.NewActionBlock(fmt.Sprintf("dw_decide:%s:r%d", p.ID, n.Round), approve, reject))
	}
	return blocks
}

// paramsChunk bounds each piece of the params shown in one section: even
// fully escaped (4 characters per '<') a piece stays under Slack's 3,000
// characters per section text, so no bound param is ever cut off.
const paramsChunk = 700

// actionBlocks show every field the approval binds, untruncated: the
// person approves exactly what is shown.
func actionBlocks(a *approvals.ActionSpec) []slack.Block {
	if a == nil {
		return []slack.Block{slack.NewContextBlock("", mrkdwn("Runs nothing: no tool may dispatch under this approval; people carry it out."))}
	}
	var lines []string
	var params string
	for _, f := range a.Fields() {
		if f.Name == "params" {
			params = approvals.Line(f.Value)
			continue
		}
		lines = append(lines, fmt.Sprintf("*%s*: %s", f.Name, esc(approvals.Line(f.Value))))
	}
	blocks := []slack.Block{slack.NewSectionBlock(sectionText("*Allows exactly this action, nothing else*\n"+strings.Join(lines, "\n")), nil, nil)}
	r := []rune(params)
	for i := 0; i < len(r); i += paramsChunk {
		head := ""
		if i == 0 {
			head = "*params*\n"
		}
		blocks = append(blocks, slack.NewSectionBlock(sectionText(head+"```"+esc(string(r[i:min(i+paramsChunk, len(r))]))+"```"), nil, nil))
	}
	return blocks
}

// sectionText is a section's own text, which Slack allows 3,000 characters.
func sectionText(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, truncate(s, maxSection), false, false)
}

// OutcomeBlocks replace a request's buttons once it is closed, so nobody
// clicks on a stale request.
func OutcomeBlocks(cfg *config.Config, n approvals.Notice) []slack.Block {
	p := n.Proposal
	var head, body string
	switch {
	case n.Outcome == "escalated" && p.State.Open():
		head = "Escalated: " + approvals.Line(p.What)
		body = fmt.Sprintf("No answer from %s in time; %s now decides %s.", mention(cfg, n.Approver), mention(cfg, p.Approver), p.ID)
	case p.Decision != nil:
		verb := "Approved"
		if p.Decision.Verdict == approvals.VerdictReject {
			verb = "Rejected"
		}
		head = verb + ": " + approvals.Line(p.What)
		body = fmt.Sprintf("*%s* %s by %s via %s at %s.", p.ID, strings.ToLower(verb), mention(cfg, p.Decision.PersonID), p.Decision.Channel, slackDate(p.Decision.At))
		if p.Decision.Reason != "" {
			body += "\nReason: " + esc(approvals.Text(p.Decision.Reason, ""))
		}
	case p.State == approvals.StateExpired:
		head = "Expired: " + approvals.Line(p.What)
		body = fmt.Sprintf("*%s* expired unanswered; nothing was granted.", p.ID)
	default:
		head = "Closed: " + approvals.Line(p.What)
		body = fmt.Sprintf("*%s* is %s.", p.ID, p.State)
	}
	body += fmt.Sprintf("\nReceipt: `dw receipt show %s`", p.ReceiptID)
	return []slack.Block{
		slack.NewHeaderBlock(plain(head)),
		slack.NewSectionBlock(mrkdwn(body), nil, nil),
	}
}

// fallbackText is the notification text for clients that show no blocks.
func fallbackText(n approvals.Notice) string {
	return fmt.Sprintf("Approval needed for %s: %s (undo: %s; expires %s)", n.Proposal.ID, approvals.Line(n.Proposal.What), approvals.Line(n.Proposal.Undo),
		n.Proposal.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
}

func plain(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, truncate(s, maxHeader), false, false)
}

func mrkdwn(s string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, truncate(s, maxField), false, false)
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// esc escapes the three characters Slack's mrkdwn treats as control.
func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func bullets(items []string) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("• " + esc(approvals.Line(it)))
	}
	return b.String()
}

// mention is <@U…> with the name for people with a Slack id, else the name.
func mention(cfg *config.Config, personID string) string {
	if p, ok := cfg.Person(personID); ok {
		name := p.Name
		if name == "" {
			name = p.ID
		}
		if p.SlackID != "" {
			return fmt.Sprintf("<@%s> (%s)", p.SlackID, esc(name))
		}
		return esc(name)
	}
	return esc(personID)
}

// slackDate shows a time in each reader's time zone, with UTC as fallback.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}
