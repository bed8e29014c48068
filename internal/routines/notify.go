package routines

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/dataworkers/dw/internal/approvals"
	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
)

// Notifier posts a message to a Slack user or channel, optionally in the
// thread of an earlier message, and says where it went.
type Notifier interface {
	Post(ctx context.Context, to, text, threadTS string) (channel, ts string, err error)
}

// SlackNotifier posts with the bot token dw.yaml names.
type SlackNotifier struct{ api *slack.Client }

// NewSlack connects with the configured bot token; nil, nil when Slack is
// not configured (runs then record who would have been told).
func NewSlack(cfg *config.Config, log *slog.Logger) (*SlackNotifier, error) {
	if cfg.Slack == nil {
		return nil, nil
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
	return &SlackNotifier{api: slack.New(bot, opts...)}, nil
}

// Post sends text to a user id (a direct message) or a channel.
func (s *SlackNotifier) Post(ctx context.Context, to, text, threadTS string) (string, string, error) {
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	return s.api.PostMessageContext(ctx, to, opts...)
}

// owner is who hears first about an asset, and why them.
type owner struct {
	person, role string
}

// ownerOf names the owner of an asset: its owner in the catalog, else the
// first owner of the domain dw.yaml puts it in, else the owner of the
// nearest owned asset upstream (usually the one who can answer for it).
func (r *Runner) ownerOf(ctx context.Context, asset string) (owner, bool) {
	var upstream owner
	if res, err := r.graph.Owners(ctx, lineage.OwnersParams{Assets: []string{asset}}); err == nil && len(res.Assets) > 0 {
		a := res.Assets[0]
		if a.Owner != "" {
			return owner{a.Owner, "owner of " + asset + " in the catalog"}, true
		}
		if a.UpstreamOwner != "" {
			upstream = owner{a.UpstreamOwner, "owner of " + a.UpstreamOwnerAsset + ", upstream of " + asset}
		}
	}
	ids := lineage.Identities{Graph: r.graph, Names: lineage.NamesFromConfig(r.o.Config)}
	if d, ok, err := approvals.DomainOf(ctx, r.o.Config, ids, asset); err == nil && ok && len(d.Owners) > 0 {
		return owner{d.Owners[0], "owner of domain " + d.Name}, true
	}
	return upstream, upstream.person != ""
}

// tell sends each incident's owner what the run saw: the incident's first
// message, or a reply in its thread when they already heard of it. With
// no Slack it records who would have been told.
func (r *Runner) tell(ctx context.Context, routine string, o *observation) {
	for _, inc := range o.incidents {
		own, ok := r.ownerOf(ctx, inc.Asset)
		if !ok {
			o.notified = append(o.notified, Notified{Incident: inc.ID, Via: "none",
				Note: "nobody to tell: " + inc.Asset + " has no owner in the catalog and is in no domain with owners in dw.yaml"})
			continue
		}
		var props []Proposal
		for _, p := range o.proposals {
			if p.Incident == inc.ID {
				props = append(props, p)
			}
		}
		o.notified = append(o.notified, r.notify(ctx, routine, inc, own, o.seen[inc.ID], props))
	}
}

func (r *Runner) notify(ctx context.Context, routine string, inc Incident, own owner, seen []string, props []Proposal) Notified {
	n := Notified{Person: own.person, Incident: inc.ID, Role: own.role, Via: "slack"}
	p, known := r.o.Config.Person(own.person)
	if known && p.Name != "" {
		n.Name = p.Name
	}
	if r.o.Notifier == nil {
		n.Via = "none"
	}
	first, channel, rootTS, prevVia, err := claimNotice(ctx, r.o.DB, inc.ID, own.person, n.Via, r.o.Clock.Now())
	if err != nil {
		n.Note = "could not record the notice: " + err.Error()
		return n
	}
	if r.o.Notifier == nil {
		if first {
			n.Note = "Slack is not configured: would have been sent the incident's first message"
		} else {
			n.Note = "Slack is not configured: would have been sent a follow-up in the incident's thread"
		}
		return n
	}
	to := ""
	switch {
	case channel != "":
		to = channel
	case known && p.SlackID != "":
		to = p.SlackID
	case r.o.Config.Slack != nil && r.o.Config.Slack.Channel != "":
		to = r.o.Config.Slack.Channel
	default:
		n.Note = own.person + " has no slack_id under people: in dw.yaml and slack.channel is empty; nobody could be messaged"
		if first {
			_ = releaseNotice(ctx, r.o.DB, inc.ID, own.person)
		}
		return n
	}
	if !first && rootTS == "" {
		if prevVia == "slack" {
			// Another run is posting the incident's first message right
			// now: wait for it, to thread under it rather than post a
			// second first message.
			for i := 0; i < 40 && rootTS == ""; i++ {
				time.Sleep(250 * time.Millisecond)
				if c, ts, err := noticeRoot(ctx, r.o.DB, inc.ID, own.person); err == nil {
					channel, rootTS = c, ts
				}
			}
		}
		// Recorded before Slack was configured (or that post failed):
		// this message becomes the first.
		if rootTS == "" {
			first = true
		}
	}
	text := r.message(routine, inc, own, seen, props, first)
	thread := rootTS
	if first {
		thread = ""
	}
	ch, ts, err := r.o.Notifier.Post(ctx, to, text, thread)
	if err != nil {
		n.Note = "Slack post failed: " + err.Error()
		if first {
			_ = releaseNotice(ctx, r.o.DB, inc.ID, own.person)
		}
		return n
	}
	n.Sent, n.Channel, n.TS = true, ch, ts
	if first {
		if err := noticePosted(ctx, r.o.DB, inc.ID, own.person, ch, ts, n.Via); err != nil {
			n.Note = "posted, but where it went could not be recorded: " + err.Error()
		}
	} else {
		n.ThreadTS = rootTS
	}
	return n
}

// message is what the owner reads: what was seen against the baseline,
// the incident, and what to run next.
func (r *Runner) message(routine string, inc Incident, own owner, seen []string, props []Proposal, first bool) string {
	var b strings.Builder
	who := own.person
	if p, ok := r.o.Config.Person(own.person); ok && p.Name != "" {
		who = p.Name
	}
	if first {
		verb := "joined"
		if inc.Opened {
			verb = "opened"
		}
		fmt.Fprintf(&b, "%s, routine %s %s incident %s on %s (you are the %s).\n", who, routine, verb, inc.ID, inc.Asset, own.role)
	} else {
		fmt.Fprintf(&b, "Routine %s saw more on incident %s (%s):\n", routine, inc.ID, inc.Status)
	}
	const maxLines = 8
	for i, s := range seen {
		if i == maxLines {
			fmt.Fprintf(&b, "• … and %d more\n", len(seen)-maxLines)
			break
		}
		fmt.Fprintf(&b, "• %s\n", s)
	}
	for _, p := range props {
		if p.ID != "" {
			fmt.Fprintf(&b, "Proposed %s: %s; %s decides (dw approve %s). The routine changes nothing itself.\n", p.ID, p.What,
				approvals.PersonLabel(r.o.Config, p.Approver), p.ID)
		} else if p.Target != "" {
			fmt.Fprintf(&b, "Hold of %s %s\n", p.Target, p.Note)
		}
	}
	if first {
		fmt.Fprintf(&b, "Next: ask dw-incidents to diagnose_incident %s (ranked causes and blast radius); get_incident %s shows every symptom.", inc.ID, inc.ID)
	}
	return strings.TrimSpace(b.String())
}
