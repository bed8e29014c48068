package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dataworkers/dw/internal/config"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/suggest"
)

// Decider is the person behind a decision and the channel that vouches
// for them. The channel's own identity (a Slack user id, an OS login) is
// checked against the approvers recorded in the store (with the proposal,
// or for the domain: records.go, governors.go), so a caller cannot act in
// someone else's name by naming them or by loading a config that does.
type Decider struct {
	// PersonID is a person id from the config's people.
	PersonID string `json:"person"`
	// Channel is slack, elicitation or terminal.
	Channel Channel `json:"channel"`
	// SlackUserID is the clicking Slack user (slack channel).
	SlackUserID string `json:"slack_user,omitempty"`
	// OSUser is the login running dw or the MCP client (terminal and
	// elicitation channels).
	OSUser string `json:"os_user,omitempty"`
	// Evidence is what the channel recorded (message, team, host, …).
	Evidence map[string]string `json:"evidence,omitempty"`
}

// OSUserDecider resolves the person an OS login is mapped to, for the
// terminal and elicitation channels.
func OSUserDecider(cfg *config.Config, channel Channel, osUser string) (Decider, error) {
	if channel != ChannelTerminal && channel != ChannelElicitation {
		return Decider{}, invalid("channel %q is not an OS-user channel; valid: terminal, elicitation", channel)
	}
	p, ok := cfg.PersonForOSUser(osUser)
	if !ok {
		return Decider{}, invalid("OS user %q is not mapped to a person in the config; add it to that person's os_users under people:", osUser)
	}
	return Decider{PersonID: p.ID, Channel: channel, OSUser: osUser, Evidence: map[string]string{"os_user": osUser}}, nil
}

// PersonForSlackUser finds the person whose slack_id is the Slack user.
func PersonForSlackUser(cfg *config.Config, slackUserID string) (*config.Person, bool) {
	if slackUserID == "" {
		return nil, false
	}
	for i := range cfg.People {
		if cfg.People[i].SlackID == slackUserID {
			return &cfg.People[i], true
		}
	}
	return nil, false
}

// SlackDecider resolves the person behind a Slack user id.
func SlackDecider(cfg *config.Config, slackUserID string, evidence map[string]string) (Decider, error) {
	p, ok := PersonForSlackUser(cfg, slackUserID)
	if !ok {
		return Decider{}, invalid("Slack user %s is not mapped to a person in the config (people[].slack_id)", slackUserID)
	}
	ev := map[string]string{"slack_user": slackUserID}
	for k, v := range evidence {
		ev[k] = v
	}
	return Decider{PersonID: p.ID, Channel: ChannelSlack, SlackUserID: slackUserID, Evidence: ev}, nil
}

// evidenceOf merges the channel identity into the evidence map.
func evidenceOf(by Decider) map[string]string {
	ev := map[string]string{}
	for k, v := range by.Evidence {
		ev[k] = v
	}
	if by.SlackUserID != "" {
		ev["slack_user"] = by.SlackUserID
	}
	if by.OSUser != "" {
		ev["os_user"] = by.OSUser
	}
	return ev
}

// DomainOf returns the domain that owns an asset, matching domains' asset
// globs against every name the asset is known by (lineage.Identities): its
// id, its full and short table names and its aliases in the context
// graph, such as the dbt id of the model that builds a table. So
// duckdb://sales.*, sales.*, duckdb://warehouse.sales.* and dbt://*.shop.*
// all own the table dbt://model.shop.orders builds as
// duckdb://warehouse.sales.orders, however it is spelled. The asset's own
// names (those on its id's platform) are matched first, in dw.yaml's order
// of domains, and its ids in other tools only when no domain owns those:
// a Hightouch sync that a dbt exposure also declares belongs to the domain
// of hightouch://sync/*, not to the one of dbt://*.loyalty.*. Table globs
// and names are compared part by part on full names
// (lineage.Names.MatchGlob); other globs follow path.Match, where * stops
// at a slash and "**" (as in "sigma://**") matches any run of characters,
// because asset ids carry paths of any depth. A spelling the graph cannot
// place (unknown, or fitting several assets) is matched as it is; one that
// is no asset id is an error.
func DomainOf(ctx context.Context, cfg *config.Config, ids lineage.Identities, asset string) (*config.Domain, bool, error) {
	own, other := []string{asset}, []string(nil)
	it, err := ids.Of(ctx, asset)
	var amb *lineage.AmbiguousError
	switch {
	case err == nil:
		own = nil
		platform, _, _ := lineage.SplitID(it.ID)
		for _, n := range it.Names {
			if p, _, _ := lineage.SplitID(n); p == platform {
				own = append(own, n)
			} else {
				other = append(other, n)
			}
		}
	case errors.As(err, &amb) || errors.Is(err, lineage.ErrUnknownAsset):
	default:
		return nil, false, err
	}
	for _, names := range [][]string{own, other} {
		for i := range cfg.Domains {
			for _, pat := range cfg.Domains[i].Assets {
				for _, n := range names {
					if ids.Names.MatchGlob(pat, n) {
						return &cfg.Domains[i], true, nil
					}
				}
			}
		}
	}
	return nil, false, nil
}

// DomainOf is the package's DomainOf over this service's store and
// configuration.
func (s *Service) DomainOf(ctx context.Context, asset string) (*config.Domain, bool, error) {
	return DomainOf(ctx, s.cfg, s.ids, asset)
}

// globMatch is MatchGlob knowing no warehouse.
func globMatch(pat, id string) bool { return (*lineage.Names)(nil).MatchGlob(pat, id) }

// Domain finds a configured domain by name.
func Domain(cfg *config.Config, name string) (*config.Domain, error) {
	var names []string
	for i := range cfg.Domains {
		if cfg.Domains[i].Name == name {
			return &cfg.Domains[i], nil
		}
		names = append(names, cfg.Domains[i].Name)
	}
	if len(names) == 0 {
		return nil, invalid("no domain %q: the config defines no domains; add one under domains: with its assets, owners and autonomy", name)
	}
	return nil, invalid("no domain %q; closest: %s (configured: %s)", name,
		strings.Join(suggest.Closest(name, names, 3), ", "), strings.Join(names, ", "))
}

// resolveDomain names the domain of a set of targets: the explicit one,
// else the one their ids match. Targets in different domains are refused,
// because each domain has its own approvers and autonomy.
func (s *Service) resolveDomain(ctx context.Context, explicit string, targets []string) (*config.Domain, error) {
	cfg := s.cfg
	if explicit != "" {
		d, err := Domain(cfg, explicit)
		if err != nil {
			return nil, err
		}
		for _, t := range targets {
			other, ok, err := s.DomainOf(ctx, t)
			if err != nil {
				return nil, err
			}
			if ok && other.Name != d.Name {
				return nil, invalid("target %s belongs to domain %s, not %s; propose one change per domain", t, other.Name, d.Name)
			}
		}
		return d, nil
	}
	var found *config.Domain
	for _, t := range targets {
		d, ok, err := s.DomainOf(ctx, t)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, invalid("asset %s is in no domain: none of the domains' asset globs matches it (tried %s); add a glob that does to a domain's assets (domains[].assets) in %s",
				t, triedGlobs(cfg), configName(cfg))
		}
		if found != nil && found.Name != d.Name {
			return nil, invalid("targets span domains %s and %s; propose one change per domain", found.Name, d.Name)
		}
		found = d
	}
	if found == nil {
		return nil, invalid("no targets: name at least one asset id the change acts on")
	}
	return found, nil
}

// configName names the file the domains came from for an error message.
func configName(cfg *config.Config) string {
	if cfg.Source == "" {
		return "a dw.yaml (none was found, so the embedded default is in use)"
	}
	return cfg.Source
}

// triedGlobs lists every domain's asset globs, domain by domain, for an
// error saying none matched; cut after about 600 characters, as a config
// may hold hundreds.
func triedGlobs(cfg *config.Config) string {
	if len(cfg.Domains) == 0 {
		return "none: no domains are configured"
	}
	const budget = 600
	var b strings.Builder
	for i, d := range cfg.Domains {
		if b.Len() > budget {
			fmt.Fprintf(&b, "; and %d more domain(s)", len(cfg.Domains)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.Name + ":")
		if len(d.Assets) == 0 {
			b.WriteString(" no assets")
		}
		for j, g := range d.Assets {
			if j > 0 && b.Len()+len(g) > budget {
				fmt.Fprintf(&b, " and %d more", len(d.Assets)-j)
				break
			}
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString(" " + g)
		}
	}
	return b.String()
}

func personName(cfg *config.Config, id string) string {
	if p, ok := cfg.Person(id); ok && p.Name != "" {
		return p.Name
	}
	return id
}

// PersonLabel is "Name (id)" for messages, or the id alone.
func PersonLabel(cfg *config.Config, id string) string {
	if n := personName(cfg, id); n != id {
		return fmt.Sprintf("%s (%s)", n, id)
	}
	return id
}
