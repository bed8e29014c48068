package incidents

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/page"
	"github.com/dataworkers/dw/internal/store"
)

// HistoryParams is the input of get_incident_history.
type HistoryParams struct {
	Asset string `json:"asset" jsonschema:"asset id whose feed to look at"`
	Hops  int    `json:"hops,omitempty" jsonschema:"also include incidents on assets this many hops up- or downstream; default 4, 0 uses the default, at most 20"`
	page.Params
}

// PastCause is the top-ranked cause of an earlier incident.
type PastCause struct {
	Kind       changelog.ChangeKind `json:"kind" jsonschema:"kind of change"`
	Summary    string               `json:"summary" jsonschema:"the change in one line"`
	ChangeID   int64                `json:"change_id" jsonschema:"change id"`
	Asset      string               `json:"asset" jsonschema:"the changed asset nearest the symptoms"`
	Confidence float64              `json:"confidence" jsonschema:"confidence of the ranking"`
}

// PastIncident is one incident on the feed.
type PastIncident struct {
	ID             string     `json:"id" jsonschema:"incident id"`
	Title          string     `json:"title" jsonschema:"one-line summary"`
	Status         Status     `json:"status" jsonschema:"status"`
	Asset          string     `json:"asset" jsonschema:"the incident's asset nearest the asked one"`
	Relation       string     `json:"relation" jsonschema:"same_asset, upstream or downstream of the asked asset"`
	Distance       int        `json:"distance" jsonschema:"hops between the two assets"`
	Onset          time.Time  `json:"onset" jsonschema:"earliest symptom time"`
	DetectedAt     time.Time  `json:"detected_at" jsonschema:"when it was opened"`
	ResolvedAt     time.Time  `json:"resolved_at,omitzero" jsonschema:"when it was verified, else closed"`
	DetectSeconds  int64      `json:"detect_seconds" jsonschema:"time to detect: onset to opening, in seconds"`
	ResolveSeconds int64      `json:"resolve_seconds,omitempty" jsonschema:"time to resolve: opening to verified (else closed), in seconds; absent while unresolved"`
	TimeToDetect   string     `json:"time_to_detect" jsonschema:"time to detect in words"`
	TimeToResolve  string     `json:"time_to_resolve" jsonschema:"time to resolve in words, or unresolved"`
	TopCause       *PastCause `json:"top_cause,omitempty" jsonschema:"the top-ranked cause, once diagnosed"`
	CauseRecurs    bool       `json:"cause_recurs" jsonschema:"true when another incident on the feed had the same kind of top cause on the same asset"`
}

// RecurringCause is a kind of change that caused more than one incident on
// the feed.
type RecurringCause struct {
	Kind      changelog.ChangeKind `json:"kind" jsonschema:"kind of change"`
	Asset     string               `json:"asset" jsonschema:"the changed asset"`
	Count     int                  `json:"count" jsonschema:"incidents it was the top cause of"`
	Incidents []string             `json:"incidents" jsonschema:"their ids, oldest first"`
}

// HistoryResult is the output of get_incident_history.
type HistoryResult struct {
	Asset     string           `json:"asset" jsonschema:"the asset asked about"`
	Incidents []PastIncident   `json:"incidents" jsonschema:"this page of incidents on the feed, newest first"`
	Recurring []RecurringCause `json:"recurring" jsonschema:"causes that recur on the feed (over every page)"`
	Summary   string           `json:"summary" jsonschema:"short text for a person"`
	page.Info
}

// MaxHistoryHops is how far up- and downstream a feed's history looks.
const MaxHistoryHops = 20

// History lists incidents on an asset or its feed (assets within Hops up-
// or downstream in the graph) with their causes, how long they took to
// detect and resolve, and which causes recur.
func (s *Service) History(ctx context.Context, p HistoryParams) (*HistoryResult, error) {
	spellings, err := s.assetSpellings(ctx, "asset", p.Asset)
	if err != nil {
		return nil, err
	}
	asset := spellings[0]
	hops := p.Hops
	switch {
	case hops < 0 || hops > MaxHistoryHops:
		return nil, invalid("hops %d out of range: use 0 to %d (0 means the default %d)", hops, MaxHistoryHops, s.settings().HistoryHops)
	case hops == 0:
		hops = s.settings().HistoryHops
	}
	pg, err := p.ResolveKeyset(historyKey, "get_incident_history", asset, strconv.Itoa(hops))
	if err != nil {
		return nil, err
	}
	type rel struct {
		relation string
		distance int
	}
	near := map[string]rel{}
	for _, a := range spellings {
		near[a] = rel{RelationSame, 0}
	}
	if s.Graph != nil {
		up, err := s.Graph.Upstream(ctx, []string{asset}, hops)
		if err != nil {
			return nil, fmt.Errorf("walk lineage upstream of %s: %w", asset, err)
		}
		down, err := s.Graph.Downstream(ctx, []string{asset}, hops)
		if err != nil {
			return nil, fmt.Errorf("walk lineage downstream of %s: %w", asset, err)
		}
		for dir, m := range map[string]map[string]Hop{RelationUpstream: up, RelationDownstream: down} {
			for a, h := range m {
				if cur, ok := near[a]; h.Distance > 0 && (!ok || h.Distance < cur.distance) {
					near[a] = rel{dir, h.Distance}
				}
			}
		}
	}
	assets := make([]string, 0, len(near))
	for a := range near {
		assets = append(assets, a)
	}
	sort.Strings(assets)
	// incident id -> its asset nearest the asked one
	nearest := map[string]string{}
	const chunk = 500
	for start := 0; start < len(assets); start += chunk {
		part := assets[start:min(start+chunk, len(assets))]
		args := make([]any, len(part))
		for i, a := range part {
			args[i] = a
		}
		rows, err := s.DB.QueryContext(ctx, "SELECT incident_id, asset FROM incident_assets WHERE asset IN ("+questionMarks(len(part))+")", args...)
		if err != nil {
			return nil, fmt.Errorf("read incidents on the feed of %s: %w", asset, err)
		}
		for rows.Next() {
			var id, a string
			if err := rows.Scan(&id, &a); err != nil {
				rows.Close()
				return nil, err
			}
			cur, ok := nearest[id]
			if !ok || near[a].distance < near[cur].distance || (near[a].distance == near[cur].distance && a < cur) {
				nearest[id] = a
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	res := &HistoryResult{Asset: asset, Incidents: []PastIncident{}, Recurring: []RecurringCause{}}
	ids := make([]string, 0, len(nearest))
	for id := range nearest {
		ids = append(ids, id)
	}
	for start := 0; start < len(ids); start += chunk {
		part := ids[start:min(start+chunk, len(ids))]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := s.DB.QueryContext(ctx, `SELECT id, title, status, onset_ms, detected_ms, verified_ms, closed_ms, causes
			FROM incidents WHERE id IN (`+questionMarks(len(part))+")", args...)
		if err != nil {
			return nil, fmt.Errorf("read incidents: %w", err)
		}
		for rows.Next() {
			var pi PastIncident
			var st, causes string
			var onset, detected, verified, closed int64
			if err := rows.Scan(&pi.ID, &pi.Title, &st, &onset, &detected, &verified, &closed, &causes); err != nil {
				rows.Close()
				return nil, err
			}
			pi.Status, pi.Onset, pi.DetectedAt = Status(st), store.FromMillis(onset), store.FromMillis(detected)
			pi.ResolvedAt = store.FromMillis(verified)
			if pi.ResolvedAt.IsZero() {
				pi.ResolvedAt = store.FromMillis(closed)
			}
			pi.Asset = nearest[pi.ID]
			pi.Relation, pi.Distance = near[pi.Asset].relation, near[pi.Asset].distance
			pi.DetectSeconds = int64(pi.DetectedAt.Sub(pi.Onset) / time.Second)
			pi.TimeToDetect = formatDuration(pi.DetectedAt.Sub(pi.Onset))
			pi.TimeToResolve = "unresolved"
			if !pi.ResolvedAt.IsZero() {
				pi.ResolveSeconds = int64(pi.ResolvedAt.Sub(pi.DetectedAt) / time.Second)
				pi.TimeToResolve = formatDuration(pi.ResolvedAt.Sub(pi.DetectedAt))
			}
			var cs []Cause
			if err := decodeJSON(causes, &cs); err != nil {
				rows.Close()
				return nil, fmt.Errorf("incident %s causes: %w", pi.ID, err)
			}
			if len(cs) > 0 {
				top := cs[0]
				changed := ""
				if len(top.Path) > 0 {
					changed = top.Path[0]
				} else if len(top.Change.Assets) > 0 {
					changed = top.Change.Assets[0]
				}
				pi.TopCause = &PastCause{Kind: top.Change.Kind, Summary: top.Change.Summary, ChangeID: top.Change.ID,
					Asset: changed, Confidence: top.Confidence}
			}
			res.Incidents = append(res.Incidents, pi)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	// Recurrence is judged over everything on the feed, before the limit.
	sort.Slice(res.Incidents, func(i, j int) bool {
		a, b := res.Incidents[i], res.Incidents[j]
		if !a.Onset.Equal(b.Onset) {
			return a.Onset.Before(b.Onset)
		}
		return a.ID < b.ID
	})
	groups := map[string]*RecurringCause{}
	var order []string
	for _, pi := range res.Incidents {
		if pi.TopCause == nil {
			continue
		}
		key := string(pi.TopCause.Kind) + "\x00" + pi.TopCause.Asset
		g, ok := groups[key]
		if !ok {
			g = &RecurringCause{Kind: pi.TopCause.Kind, Asset: pi.TopCause.Asset, Incidents: []string{}}
			groups[key] = g
			order = append(order, key)
		}
		g.Count++
		g.Incidents = append(g.Incidents, pi.ID)
	}
	for _, key := range order {
		if g := groups[key]; g.Count > 1 {
			res.Recurring = append(res.Recurring, *g)
		}
	}
	for i := range res.Incidents {
		if tc := res.Incidents[i].TopCause; tc != nil {
			res.Incidents[i].CauseRecurs = groups[string(tc.Kind)+"\x00"+tc.Asset].Count > 1
		}
	}
	slices.Reverse(res.Incidents)
	res.Summary = historySummary(res)
	// The feed is read afresh on every call, so the page starts after the
	// previous page's last (onset, id), not at a count an incident opened
	// meanwhile would shift.
	res.Incidents, res.Info = page.SliceAfter(pg, res.Incidents,
		func(pi PastIncident) page.Key { return page.Key{store.Millis(pi.Onset), pi.ID} },
		func(pi PastIncident, k page.Key) bool {
			at := store.Millis(pi.Onset)
			return at < k.Int(0) || at == k.Int(0) && pi.ID < k.Text(1)
		})
	return res, nil
}

// historyKey pages get_incident_history newest onset first, the incident
// id breaking ties.
var historyKey = page.Keyset{page.Int, page.Text}

func historySummary(r *HistoryResult) string {
	if len(r.Incidents) == 0 {
		return fmt.Sprintf("No incidents recorded on %s or its feed.", r.Asset)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d incident(s) on %s or its feed", len(r.Incidents), r.Asset)
	var detect []time.Duration
	for _, pi := range r.Incidents {
		detect = append(detect, time.Duration(pi.DetectSeconds)*time.Second)
	}
	sort.Slice(detect, func(i, j int) bool { return detect[i] < detect[j] })
	fmt.Fprintf(&b, "; median time to detect %s", formatDuration(detect[len(detect)/2]))
	for _, g := range r.Recurring {
		fmt.Fprintf(&b, "; %s on %s recurs (%d times: %s)", g.Kind, g.Asset, g.Count, strings.Join(g.Incidents, ", "))
	}
	return b.String() + "."
}
