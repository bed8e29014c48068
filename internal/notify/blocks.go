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

// Slack's Block Kit limits (docs.slack.dev/reference/block-kit): a header
// is at most 150 characters, a section field 2000, a section's own text
// 3000, a button's label 75; a confirmation dialog's title 100, its text
// 300 and each of its two buttons 30. Slack answers invalid_blocks to a
// message over any of them, so the approver would never be asked.
const (
	maxHeader       = 150
	maxField        = 2000
	maxSection      = 3000
	maxButton       = 75
	maxConfirmTitle = 100
	maxConfirmText  = 300
	maxConfirmBtn   = 30
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
	blast := mrkdwn("*Blast radius*\nthe targets only")
	if len(p.Scope) > 0 {
		blast = listField("*Blast radius*", p.Scope, p.ID)
	}
	fields := []*slack.TextBlockObject{
		mrkdwn("*Why*\n" + esc(approvals.Text(p.Why, ""))),
		blast,
		mrkdwn("*Undo*\n" + esc(approvals.Text(p.Undo, ""))),
		mrkdwn("*Expires*\n" + slackDate(p.ExpiresAt) + "\nthen it escalates; never granted by default"),
		listField("*Targets*", p.Targets, p.ID),
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
		// The dialog is a reminder of what the click does; the full what and
		// undo are in the fields above it, so cutting it to Slack's 300
		// characters hides nothing the approver has not been shown.
		approve := slack.NewButtonBlockElement(ActionID(approvals.VerdictApprove, p.ID), p.ID, plainN("Approve", maxButton)).
			WithStyle(slack.StylePrimary).
			WithConfirm(slack.NewConfirmationBlockObject(plainN("Approve "+p.ID+"?", maxConfirmTitle),
				slack.NewTextBlockObject(slack.MarkdownType, escCut(approvals.Line(p.What)+"\nUndo: "+approvals.Text(p.Undo, ""), maxConfirmText), false, false),
				plainN("Approve", maxConfirmBtn), plainN("Cancel", maxConfirmBtn)))
		reject := slack.NewButtonBlockElement(ActionID(approvals.VerdictReject, p.ID), p.ID, plainN("Reject", maxButton)).
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
	return plainN(s, maxHeader)
}

func plainN(s string, n int) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, truncate(s, n), false, false)
}

// escCut escapes s for mrkdwn and cuts it to at most n characters as sent,
// never inside an escape (a half "&am" would show as text), ending with
// "…" when anything was left out.
func escCut(s string, n int) string {
	if e := esc(s); len([]rune(e)) <= n {
		return e
	}
	var b strings.Builder
	used := 0
	for _, r := range s {
		e := esc(string(r))
		if used+len([]rune(e)) > n-1 {
			break
		}
		b.WriteString(e)
		used += len([]rune(e))
	}
	return b.String() + "…"
}

// listField is a field of one bullet per item within Slack's 2,000
// characters; when the items do not all fit it says how many are not shown
// and where to read every one, instead of stopping at a bare "…".
func listField(head string, items []string, id string) *slack.TextBlockObject {
	var b strings.Builder
	b.WriteString(head)
	used := len([]rune(head))
	for i, it := range items {
		line := "\n• " + esc(approvals.Line(it))
		tail := 0
		if rest := len(items) - i - 1; rest > 0 {
			tail = len([]rune(moreLine(rest, id)))
		}
		if n := len([]rune(line)); used+n+tail > maxField {
			if i == 0 && len(items) == 1 {
				// One item longer than the field: show its start.
				b.WriteString("\n• " + escCut(approvals.Line(it), maxField-used-3))
			} else {
				b.WriteString(moreLine(len(items)-i, id))
			}
			break
		}
		b.WriteString(line)
		used += len([]rune(line))
	}
	return slack.NewTextBlockObject(slack.MarkdownType, b.String(), false, false)
}

func moreLine(n int, id string) string {
	return fmt.Sprintf("\n… and %d more; `dw approvals show %s` lists every one", n, id)
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
