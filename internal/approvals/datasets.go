package approvals

import (
	"fmt"
)

// A lineage event can name hundreds of datasets; a request lists at most
// lineageDatasetsShown of each side so it stays readable (Slack, the MCP
// form, a terminal). The approver must still be able to see every dataset
// they allow to be posted, so:
//
//   - the action binds datasets_sha256, the digest of the full lists, and
//     every rendering of a request says how many there are, how many it
//     lists, that digest, and where to see all (dw approvals show ID --all);
//   - a proposal whose request lists fewer than the event names must keep
//     the event itself (DetailLineageEvent) with the proposal, sealed with
//     it, and that event must hash to what the action binds;
//   - a decision to approve is refused when that list cannot be produced;
//   - dw approve prints every dataset and asks for confirmation first.

// DetailLineageEvent is the details key under which a lineage_event
// proposal keeps the event it posts (agents/incidents writes it): the
// source of the full dataset lists shown to the approver.
const DetailLineageEvent = "lineage_event"

// LineageDatasets are every dataset a lineage event names.
type LineageDatasets struct {
	// Inputs and Outputs are each dataset as DatasetName shows it.
	Inputs  []string `json:"inputs"`
	Outputs []string `json:"outputs"`
	// SHA256 is the digest of the canonical JSON {inputs, outputs} of the
	// exact [namespace, name] pairs: the datasets_sha256 a lineage action
	// binds.
	SHA256 string `json:"sha256"`
}

// Total is how many datasets are named on both sides.
func (d *LineageDatasets) Total() int { return len(d.Inputs) + len(d.Outputs) }

// DatasetName is one dataset as people are shown it: namespace/name, each
// exactly as the event gives it (never trimmed), and quoted when it could
// be read as another: a namespace that is empty, has leading or trailing
// space, holds a quote or a character a screen would act on; a name that
// does, or holds a slash (so "duckdb://billing" + "t1" and "duckdb://" +
// "billing/t1" print differently). Two different datasets never print the
// same.
func DatasetName(namespace, name string) string {
	return quotedName(namespace, "") + "/" + quotedName(name, "/")
}

// lineageDatasets lists an event's datasets as DatasetName shows them, in
// the event's order, with the digest of both lists' exact names.
func lineageDatasets(event map[string]any) LineageDatasets {
	var exact [2][][2]string
	side := func(i int, k string) []string {
		list, _ := event[k].([]any)
		out := make([]string, 0, len(list))
		pairs := make([][2]string, 0, len(list))
		for _, d := range list {
			ds, _ := d.(map[string]any)
			ns, _ := ds["namespace"].(string)
			name, _ := ds["name"].(string)
			out = append(out, DatasetName(ns, name))
			pairs = append(pairs, [2]string{ns, name})
		}
		exact[i] = pairs
		return out
	}
	d := LineageDatasets{Inputs: side(0, "inputs"), Outputs: side(1, "outputs")}
	// Two lists of string pairs always encode.
	d.SHA256, _ = CanonicalSHA256(map[string]any{"inputs": exact[0], "outputs": exact[1]})
	return d
}

// datasetCounts reads what a lineage action's params list and count. ok is
// false for an action that is not a lineage event's.
type datasetCounts struct {
	listedIn, listedOut, in, out int
	sha                          string
}

func (a *ActionSpec) datasetCounts() (datasetCounts, bool) {
	if a == nil || a.System != SystemOpenLineage {
		return datasetCounts{}, false
	}
	num := func(k string) int {
		switch v := a.Params[k].(type) {
		case float64:
			return int(v)
		case int:
			return v
		}
		return 0
	}
	listed := func(k string) int { l, _ := a.Params[k].([]any); return len(l) }
	sha, _ := a.Params["datasets_sha256"].(string)
	return datasetCounts{listedIn: listed("inputs"), listedOut: listed("outputs"), in: num("inputs_count"), out: num("outputs_count"), sha: sha}, true
}

// summarized reports whether the request lists fewer datasets than the
// event names.
func (c datasetCounts) summarized() bool { return c.listedIn < c.in || c.listedOut < c.out }

// datasetsField is the line every rendering of a summarized lineage
// request shows: how many datasets, how many are listed, the digest that
// binds them all, and where to read every one.
func (a *ActionSpec) datasetsField() (ActionField, bool) {
	c, ok := a.datasetCounts()
	if !ok || !c.summarized() {
		return ActionField{}, false
	}
	return ActionField{"datasets", fmt.Sprintf(
		"this request lists %d of %d inputs and %d of %d outputs; the approval covers all %d, bound by datasets_sha256 %s; see every one with: dw approvals show <this proposal's id> --all",
		c.listedIn, c.in, c.listedOut, c.out, c.in+c.out, orUnset(c.sha))}, true
}

// DatasetsSummarized reports whether p's request lists fewer datasets
// than its lineage event names, so the approver needs the full list
// (LineageDatasets) besides the request.
func (p *Proposal) DatasetsSummarized() bool {
	c, ok := p.Action.datasetCounts()
	return ok && c.summarized()
}

// LineageDatasets is every dataset a lineage_event proposal's event
// names, read from the event kept with the proposal and checked against
// what the action binds: the event's SHA-256 and datasets_sha256. It is
// nil, nil for a proposal that posts no lineage event, and an error when
// the full list cannot be shown as the one approved.
func (p *Proposal) LineageDatasets() (*LineageDatasets, error) {
	c, ok := p.Action.datasetCounts()
	if !ok {
		return nil, nil
	}
	raw, kept := p.Details[DetailLineageEvent]
	if !kept {
		return nil, fmt.Errorf("%s does not keep its lineage event (details.%s), so its %d datasets cannot be listed", p.label(), DetailLineageEvent, c.in+c.out)
	}
	event, isObject := raw.(map[string]any)
	if !isObject {
		return nil, fmt.Errorf("details.%s of %s is not an event object", DetailLineageEvent, p.label())
	}
	sum, err := CanonicalSHA256(event)
	if err != nil {
		return nil, err
	}
	if bound, _ := p.Action.Params["event_sha256"].(string); sum != bound {
		return nil, fmt.Errorf("details.%s of %s is not the event its action binds (event_sha256 %s, the kept event hashes to %s)",
			DetailLineageEvent, p.label(), shortHash(bound), shortHash(sum))
	}
	d := lineageDatasets(event)
	if len(d.Inputs) != c.in || len(d.Outputs) != c.out {
		return nil, fmt.Errorf("%s's action counts %d inputs and %d outputs, its event names %d and %d", p.label(), c.in, c.out, len(d.Inputs), len(d.Outputs))
	}
	if c.summarized() && d.SHA256 != c.sha {
		return nil, fmt.Errorf("%s's action binds datasets_sha256 %s, its event's datasets hash to %s", p.label(), orUnset(shortHash(c.sha)), shortHash(d.SHA256))
	}
	return &d, nil
}

// checkLineageDatasets refuses a lineage_event proposal whose approver
// could not see every dataset: one whose request lists only some and that
// does not keep the event they come from, or that keeps an event other
// than the one its action binds (the notes would mislead).
func checkLineageDatasets(p *Proposal) error {
	if _, kept := p.Details[DetailLineageEvent]; !kept && !p.DatasetsSummarized() {
		return nil
	}
	if _, err := p.LineageDatasets(); err != nil {
		c, _ := p.Action.datasetCounts()
		return invalid("%v; the request lists %d of the %d datasets, so the approver must be able to see all of them: keep the event the action binds in details.%s",
			err, c.listedIn+c.listedOut, c.in+c.out, DetailLineageEvent)
	}
	return nil
}

// label names a proposal in messages, before it has an id too.
func (p *Proposal) label() string {
	if p.ID == "" {
		return "the proposal"
	}
	return "proposal " + p.ID
}

func orUnset(s string) string {
	if s == "" {
		return "(unset)"
	}
	return s
}

// confirmedAllDatasets refuses an approval of a summarized lineage event
// unless the decider's channel vouches, with the full list's digest, that
// every dataset was shown (datasets_sha256 in the decision's evidence).
func confirmedAllDatasets(p *Proposal, by Decider) error {
	if !p.DatasetsSummarized() {
		return nil
	}
	ds, err := p.LineageDatasets()
	if err != nil {
		return invalid("%s cannot be approved: %v; nothing was decided", p.ID, err)
	}
	// Only dw at a terminal prints the full list; no other channel's
	// evidence can vouch for it.
	if by.Channel == ChannelTerminal && by.Evidence["datasets_sha256"] == ds.SHA256 {
		return nil
	}
	return invalid("%s posts a lineage event naming %d datasets and its request lists only some, so it is approved only where every one is shown: `dw approve %s` at a terminal (or with --datasets-sha256 %s after reading `dw approvals show %s --all`); nothing was decided",
		p.ID, ds.Total(), p.ID, ds.SHA256, p.ID)
}
