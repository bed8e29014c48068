package incidents

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dataworkers/dw/internal/changelog"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/store"
)

// DiagnoseOptions tune a diagnosis; zero fields take the defaults.
type DiagnoseOptions struct {
	// Lookback is how far before the onset changes are considered.
	// Default 72h.
	Lookback time.Duration
	// Grace admits changes shortly after the first anomalous bucket ends:
	// a change's recorded time can lag when it took effect (a deploy
	// recorded when it finished). Default 15 min.
	Grace time.Duration
	// MaxDepth is how many hops upstream of the symptoms lineage is
	// followed. Default 10.
	MaxDepth int
	// MaxCauses is how many ranked causes are kept. Default
	// DefaultMaxCauses.
	MaxCauses int
	// Clock stamps the diagnosis; clock.System when nil.
	Clock clock.Clock
	// Actor is recorded in the incident's timeline.
	Actor string
}

func (o DiagnoseOptions) withDefaults() DiagnoseOptions {
	if o.Lookback <= 0 {
		o.Lookback = 72 * time.Hour
	}
	if o.Grace <= 0 {
		o.Grace = 15 * time.Minute
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = 10
	}
	if o.MaxCauses <= 0 {
		o.MaxCauses = DefaultMaxCauses
	}
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	if o.Actor == "" {
		o.Actor = "dw-incidents"
	}
	return o
}

// DiagnoseParams is the input of diagnose_incident.
type DiagnoseParams struct {
	IncidentID    string `json:"incident_id" jsonschema:"incident id, e.g. INC-12"`
	LookbackHours int    `json:"lookback_hours,omitempty" jsonschema:"hours before the onset to consider changes from; default 72, at most 720"`
}

// Diagnosis is the output of diagnose_incident.
type Diagnosis struct {
	IncidentID string       `json:"incident_id" jsonschema:"incident id"`
	Status     Status       `json:"status" jsonschema:"incident status after the diagnosis"`
	Onset      time.Time    `json:"onset" jsonschema:"start of the first anomalous bucket"`
	OnsetEnd   time.Time    `json:"onset_end" jsonschema:"end of the first anomalous bucket: the problem began between onset and onset_end"`
	Assets     []string     `json:"assets" jsonschema:"symptomatic assets"`
	Window     Window       `json:"window" jsonschema:"changes considered: from the lookback before the onset to the grace after the end of the first anomalous bucket"`
	Considered int          `json:"considered" jsonschema:"changes in the window"`
	Verdict    Verdict      `json:"verdict" jsonschema:"likely_cause (the top cause is credible), no_credible_cause (no change has a lineage path and enough confidence: nothing is cited as cause) or attributed (a person named the cause)"`
	Causes     []Cause      `json:"causes" jsonschema:"ranked candidate causes, most likely first; when the verdict is no_credible_cause they are what was considered, not causes"`
	Attributed *Attribution `json:"attributed_cause,omitempty" jsonschema:"the cause a person named (dw cause set), which proposals cite instead of the ranking"`
	Summary    string       `json:"summary" jsonschema:"short text for a person"`
}

// Diagnose ranks the recorded changes before an incident's onset as its
// candidate causes, stores the ranking on the incident and moves it to
// diagnosed.
//
// The onset is an interval: the first anomalous bucket, from its start
// (Incident.Onset) to its end (Incident.OnsetEnd). Changes from Lookback
// before its start to Grace after its end are read (the change log's time
// index keeps that to the window), so a deploy at 09:40 whose first bad
// hour is 09:00 is a candidate. Nothing depends on how wide a window was
// monitored: the same first anomalous bucket gives the same candidates and
// the same ranking. Each change is scored on five factors in [0,1]:
//
//   - lineage: 1 when the change touched a symptomatic asset or an asset
//     one hop upstream of one, 0.08 less per further hop (at least 0.4);
//     0.2 when no recorded lineage connects it (lineage may be incomplete);
//     0.05 when it is downstream of the symptoms (it cannot feed them).
//   - timing: 1 for a change inside the first anomalous bucket;
//     0.5^(lead/12h) for a change before it, so a change 5 minutes before
//     scores 0.995 and one 3 days before 0.016; a change in the grace after
//     the bucket scores 0.9 falling to 0.7.
//   - fit: how the kind of change explains the kind of symptom (a removed
//     field and nulls 1.0; a restore that skipped state and a value
//     collapse 1.0; a pipeline change and a volume gap 1.0; a change of
//     keying or partitioning and uniqueness 1.0; a generic deploy 0.4),
//     the best over the incident's symptoms.
//   - fields: 1 when a job on the path to the symptoms reads a field the
//     change removed, renamed or retyped (column lineage or a recorded
//     reader in the graph), or the field is itself the symptomatic column;
//     0.5 when the change touched no fields; 0.35 when it broke fields no
//     recorded reader on the path uses; 0.3 when it only added fields.
//     The reader walk runs only for changes to the symptoms or upstream of
//     them and stays inside the symptoms' upstream set, so its cost
//     follows what can be a cause, not the size of the window.
//   - history: 1 when an earlier incident on one of the same assets had a
//     change of the same kind as its top cause.
//
// score = lineage × (0.35·fit + 0.30·timing + 0.25·fields + 0.10·history).
// Lineage multiplies because a change that cannot reach the symptoms
// explains nothing however well the rest fits. Ties are broken by the
// change nearer the onset, then by change id, so the ranking is
// deterministic.
//
// The confidence is the probability that the change is the cause, given the
// ranking: a conditional logit of the scores, fitted on generated incidents
// (see calibrate).
//
// A cause is credible when it has a lineage path to the symptoms (same
// asset or upstream) and a timing fit (at most a day before the onset;
// see missingLegs). When the top cause is not, the verdict is
// no_credible_cause: the ranking is kept as the list of
// what was considered, and proposals cite no cause unless a person names
// one (AttributeCause, `dw cause set`). A cause a person named is kept
// across re-diagnoses.
func Diagnose(ctx context.Context, db *store.DB, g Graph, incidentID string, opts DiagnoseOptions) (*Diagnosis, error) {
	opts = opts.withDefaults()
	inc, err := readIncident(ctx, db, incidentID, false)
	if err != nil {
		return nil, err
	}
	if !CanMove(inc.Status, StatusDiagnosed) {
		return nil, invalid("incident %s is %s; diagnosis applies to open, diagnosed, proposed or escalated incidents", inc.ID, inc.Status)
	}
	if len(inc.Symptoms) == 0 {
		return nil, fmt.Errorf("incident %s has no symptoms to diagnose", inc.ID)
	}
	causes, considered, err := rankCauses(ctx, db, g, inc, opts)
	if err != nil {
		return nil, err
	}
	now := opts.Clock.Now().UTC()
	read := *inc
	var saved *Incident
	err = db.InTx(ctx, func(tx *store.Tx) error {
		// Every write to an incident moves its version, so an unchanged
		// version means the incident is as read above and need not be
		// read again; a changed one is read and checked. Each attempt
		// (InTx retries a serialization failure) starts from a copy of
		// that read, so a rolled-back attempt leaves nothing behind.
		cp := read
		cur := &cp
		version, err := incidentVersion(ctx, tx, inc.ID)
		if err != nil {
			return err
		}
		if version != read.version {
			if cur, err = readIncident(ctx, tx, inc.ID, false); err != nil {
				return err
			}
			if !CanMove(cur.Status, StatusDiagnosed) {
				return invalid("incident %s became %s during the diagnosis; diagnose it again if needed", cur.ID, cur.Status)
			}
			if len(cur.Symptoms) != len(inc.Symptoms) {
				return fmt.Errorf("incident %s gained symptoms during the diagnosis; diagnose it again", cur.ID)
			}
		}
		from := cur.Status
		// A re-diagnosis refreshes the causes and never moves the
		// incident back: proposals already sent still point at it.
		to := StatusDiagnosed
		if cur.Status == StatusProposed {
			to = StatusProposed
		}
		cur.Status, cur.Causes, cur.DiagnosedAt = to, causes, now
		note := "no recorded change in the window"
		switch {
		case len(causes) > 0 && causes[0].Credible:
			note = fmt.Sprintf("top cause: %s (confidence %.2f)", causes[0].Change.Summary, causes[0].Confidence)
		case len(causes) > 0:
			note = fmt.Sprintf("no credible cause among %d change(s) considered (best: %s, confidence %.2f, %s)",
				considered, causes[0].Change.Summary, causes[0].Confidence, causes[0].Relation)
		}
		if cur.Attributed != nil {
			note += fmt.Sprintf("; the cause %s named stays: %s", cur.Attributed.Actor, cur.Attributed.Change.Summary)
		}
		saved = cur
		return save(ctx, tx, cur, from, opts.Actor, note, now)
	})
	if err != nil {
		return nil, err
	}
	inc = saved
	d := &Diagnosis{IncidentID: inc.ID, Status: inc.Status, Onset: inc.Onset, OnsetEnd: inc.OnsetEnd, Assets: inc.Assets,
		Window: Window{Start: inc.Onset.Add(-opts.Lookback), End: inc.OnsetEnd.Add(opts.Grace)}, Considered: considered,
		Verdict: verdictOf(inc), Causes: causes, Attributed: inc.Attributed}
	d.Summary = diagnosisSummary(d)
	return d, nil
}

// DefaultMaxCauses is how many ranked causes a diagnosis keeps.
const DefaultMaxCauses = 10

// MaxLookbackHours is the longest lookback a diagnosis takes: a month.
const MaxLookbackHours = 720

// Diagnose is the diagnose_incident tool: Diagnose with the service's
// store, graph and clock.
func (s *Service) Diagnose(ctx context.Context, p DiagnoseParams) (*Diagnosis, error) {
	if p.LookbackHours < 0 || p.LookbackHours > MaxLookbackHours {
		return nil, invalid("lookback_hours %d out of range: use 1 to %d (default 72)", p.LookbackHours, MaxLookbackHours)
	}
	return Diagnose(ctx, s.DB, s.Graph, p.IncidentID, DiagnoseOptions{
		Lookback: time.Duration(p.LookbackHours) * time.Hour, Clock: s.Clock})
}

// Relations of a changed asset to the symptomatic assets.
const (
	RelationSame       = "same_asset"
	RelationUpstream   = "upstream"
	RelationDownstream = "downstream"
	RelationUnrelated  = "unrelated"
)

// ranker holds what scoring every candidate change shares.
type ranker struct {
	ctx      context.Context
	g        Graph
	opts     DiagnoseOptions
	inc      *Incident
	symptoms map[string][]Symptom // by asset
	up, down map[string]Hop
	history  map[changelog.ChangeKind][]pastCause
	readers  map[string][]FieldReader
	// scope is the symptoms' upstream set the field-reader walks stay in.
	scope Scope
	// bounding skips the field-reader walk while scoring: a change whose
	// fields factor depends on it gets its upper bound (fields = 1) and
	// walked is false. See rankWindow.
	bounding bool
	walked   bool
	// unread counts the changes rankWindow bounded from their keys and
	// never read in full.
	unread int
	// kinds holds keyBound's answers.
	kinds map[kindKey]kindBound
}

type pastCause struct {
	id    string
	onset time.Time
}

func rankCauses(ctx context.Context, db *store.DB, g Graph, inc *Incident, opts DiagnoseOptions) ([]Cause, int, error) {
	r, err := newRanker(ctx, db, g, inc, opts)
	if err != nil {
		return nil, 0, err
	}
	return r.rankWindow(ctx, db)
}

// rankWindow ranks the changes in the incident's window, best first, in
// a total order: score, then nearness to the onset, then the lower id.
//
// A change is first bounded from its key alone (its time, kind, assets and
// whether it lists field changes or skipped state: its lineage, timing
// and history factors, the best fit its kind and state can have, its
// fields factor or its most; see bound), and only the changes whose bound
// could still place them are read in full and scored further, best bound
// first (branch and bound; the changes not on or upstream of the symptoms
// first share one bound, see rest): a change read in full is bounded
// again with its field-reader walk (a downstream walk from each changed
// asset, the costly part on a large graph) left out, and walked only when
// that bound is still the best left. A bound is never under the score,
// and a change keeps its nearness and id, so when the best entry left is
// an exact score, no change left can rank above it: the ranking is
// exactly the one scoring every change and sorting them all gives. A
// window can hold a hundred thousand changes, of which ten are kept; most
// are unrelated to the symptoms or days old, and are never read again.
// On SQLite, when the symptoms' upstream is small next to the window, its
// changes are found through the asset index and the others are only
// counted, unless their shared bound reaches the top (see nearBudget).
func (r *ranker) rankWindow(ctx context.Context, db *store.DB) ([]Cause, int, error) {
	inc, opts := r.inc, r.opts
	from, to := inc.Onset.Add(-opts.Lookback), inc.OnsetEnd.Add(opts.Grace+time.Millisecond)
	var considered int
	var h candidates
	// seen says whether the snapshot below saw a change: one with an id
	// up to the log's last then, on SQLite, whose writers take ids one
	// transaction at a time; on PostgreSQL one of the ids it read (there a
	// change with a lower id can commit after the snapshot).
	var lastID int64
	var saw []int64 // on PostgreSQL, the changes off the upstream it read
	seen := func(id int64) bool { return id <= lastID }
	// The first pass bounds the changes on or upstream of the symptoms.
	// The others, most of a large window, all score under one bound (the
	// most a change with the unrelated lineage factor can score;
	// downstream scores less still): they wait behind one entry with that
	// bound (rest), and are read and bounded one by one only if it
	// reaches the top, but for changes recorded since the count.
	keep := func(upstream bool) func(k *changelog.Key) error {
		return func(k *changelog.Key) error {
			_, rel, dist := r.relation(&changelog.Change{Assets: k.Assets})
			if near := rel == RelationSame || rel == RelationUpstream; near != upstream || !seen(k.ID) {
				return nil
			}
			h = append(h, candidate{score: r.bound(k, lineageFactor(rel, dist)), gap: absDuration(inc.Onset.Sub(k.At)), id: k.ID})
			return nil
		}
	}
	// The count and the first pass in one snapshot, so that they agree
	// while other processes record changes (on PostgreSQL a change with a
	// lower id can commit after one with a higher). Only these reads: the
	// snapshot holds a connection, and the field-reader walks below need
	// others (a review had as many diagnoses as the pool has connections
	// each wait for a second one).
	err := db.ReadSnapshot(ctx, func(tx *store.Tx) error {
		if !seeks(tx.Dialect()) {
			// The window's read is the first pass, and counts it.
			lastID = math.MaxInt64
			first := keep(true)
			err := changelog.EachKeyInWindow(ctx, tx, from, to, func(k *changelog.Key) error {
				considered++
				n := len(h)
				if err := first(k); err != nil {
					return err
				}
				if len(h) == n { // off the upstream: the rest pass may take it
					saw = append(saw, k.ID)
				}
				return nil
			})
			sorted := false
			seen = func(id int64) bool {
				if !sorted { // only when the rest pass runs, which most diagnoses never need
					slices.Sort(saw)
					sorted = true
				}
				_, ok := slices.BinarySearch(saw, id)
				return ok
			}
			return err
		}
		n, last, err := changelog.CountWindow(ctx, tx, from, to)
		if err != nil {
			return err
		}
		considered, lastID = n, last
		switch budget := nearBudget(considered, len(r.up), int(last)); {
		case considered == 0:
			return nil
		case budget > 0:
			whole, err := changelog.EachKeyOnAssets(ctx, tx, slices.Collect(maps.Keys(r.up)), from, to, budget, keep(true))
			if err != nil || whole {
				return err
			}
		}
		return changelog.EachKeyInWindow(ctx, tx, from, to, keep(true))
	})
	if err != nil {
		return nil, 0, err
	}
	if considered > len(h) {
		// Before any change of its bound: gap 0 and id 0 come first.
		h = append(h, candidate{score: round3(rawScore(Factors{Lineage: lineageFactor(RelationUnrelated, -1), Fit: 1, Timing: 1, Fields: 1, History: 1})), stage: rest})
	}
	h.init()
	var order []candidate
	read := map[int64]*changelog.Change{} // the changes read in full, by id
	for len(order) < opts.MaxCauses && len(h) > 0 {
		switch top := h.pop(); top.stage {
		case rest:
			if err := changelog.EachKeyInWindow(ctx, db, from, to, keep(false)); err != nil {
				return nil, 0, err
			}
			h.init()
		case scored:
			order = append(order, top)
		case keyed:
			// Read in full with the next keyed ones at the top: a read
			// per change would cost more than the few extra it reads.
			batch := []candidate{top}
			for len(batch) < readBatch && len(h) > 0 && h[0].stage == keyed {
				batch = append(batch, h.pop())
			}
			ids := make([]int64, len(batch))
			for i, c := range batch {
				ids[i] = c.id
			}
			got, err := changelog.ByIDs(ctx, db, ids)
			if err != nil {
				return nil, 0, err
			}
			r.unread -= len(batch)
			for _, c := range batch {
				ch, found := got[c.id]
				if !found {
					return nil, 0, fmt.Errorf("change %d was removed during the diagnosis; diagnose again", c.id)
				}
				read[c.id] = &ch
				r.bounding, r.walked = boundWalks, true
				if c.score, err = r.rank(&ch); err != nil {
					return nil, 0, err
				}
				c.stage = bounded
				if r.walked {
					c.stage = scored
				}
				h.push(c)
			}
		case bounded:
			r.bounding = false
			if top.score, err = r.rank(read[top.id]); err != nil {
				return nil, 0, err
			}
			top.stage = scored
			h.push(top)
		}
	}
	r.unread += considered
	r.bounding = false // the kept causes name their readers
	causes := make([]Cause, len(order))
	for rank, c := range order {
		if err := read[c.id].LoadDetails(); err != nil {
			return nil, 0, err
		}
		if causes[rank], err = r.score(read[c.id], true); err != nil {
			return nil, 0, err
		}
		causes[rank].Rank = rank + 1
	}
	calibrate(causes)
	return causes, considered, nil
}

// nearBudget decides how a diagnosis finds the changes on or upstream of
// its symptoms, given the changes in its window (considered), the assets
// of the symptoms' upstream set (upstream) and the changes in the whole
// log (logged): by a seek per upstream asset into the asset index
// (changelog.EachKeyOnAssets), which may find at most the rows it returns
// (a row per upstream asset a change touched), or, when it returns 0 or
// fewer, by reading the whole window's keys. A seek that finds more gives
// up, having read no key, and the window is read after all.
//
// The seek is given half the cost of the window's read: one that finishes
// costs at most half the read it saves, and one that gives up makes the
// diagnosis read at most about 1.5 times what it would have. In units of
// one change read from the window (about 0.8-1 µs on SQLite), a seek
// costs a per upstream asset and r per row it finds (the row, then a
// lookup of the change where the read steps to the next entry):
// a·upstream + r·found ≤ considered/2. Measured on SQLite (load under 2),
// a is 1-1.5 on a log of up to 250k changes and 3.3 on one of a million,
// r about 1.7: a grows with the log because the asset index covers all
// of it, and once it outgrows the page cache a seek reads a page of the
// file, where the window's read does not grow so. The model adds to a in
// proportion to log2 of the log past 250k changes, which fits both.
//
// Tests replace nearBudget to take each way on the same windows.
var nearBudget = func(considered, upstream, logged int) int {
	a, r := 1.5, 1.7
	if logged > 250_000 {
		a += 0.9 * math.Log2(float64(logged)/250_000)
	}
	return int((float64(considered)/2 - a*float64(upstream)) / r)
}

// seeks reports whether a diagnosis on this store may seek the changes
// near its symptoms (nearBudget). PostgreSQL always reads its window, as
// before: its planner, once its statistics show assets with many changes,
// may scan the asset index whole or hash every row near the symptoms,
// which no LIMIT bounds (a review measured 2.4-4.7 times the window's
// read), and even the bounded seek was 1.0-1.45 times it in the review's
// windows; it cannot be held to a plan. Reading the window there also
// counts it, so no count is made (on PostgreSQL a count visits each row).
// Tests force the seek there.
var seeks = func(d store.Dialect) bool { return d != store.Postgres }

// readBatch is how many changes a diagnosis reads in full at a time.
const readBatch = 32

// A candidate's stage says what its score is: a bound from its key
// (keyed), a bound from the whole change with the field-reader walk left
// out (bounded), its score (scored), or the bound of every change not on
// or upstream of the symptoms, which have no entries of their own yet
// (rest).
const (
	keyed = iota
	bounded
	scored
	rest
)

// candidate is one change on its way through rankWindow, or the entry
// all the changes off the symptoms' upstream share until it reaches the
// top (rest): there can be one for every change in the window, so it
// holds no more than the order needs (32 bytes; the changes read in full
// are kept by id beside the heap).
type candidate struct {
	score float64
	gap   time.Duration // from the onset
	id    int64
	stage uint8
}

// before is the ranking's order: the higher score, then the change nearer
// the onset, then the lower id.
func (a candidate) before(b candidate) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.gap != b.gap {
		return a.gap < b.gap
	}
	return a.id < b.id
}

// candidates is a binary heap, the best candidate first. Built from a
// whole window at once (init), it costs a pass over the window where
// sorting it would cost a log factor more; only its first few are ever
// taken.
type candidates []candidate

func (h candidates) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candidates) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *candidates) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return top
}

func (h candidates) down(i int) {
	for {
		best, l := i, 2*i+1
		if l < len(h) && h[l].before(h[best]) {
			best = l
		}
		if r := l + 1; r < len(h) && h[r].before(h[best]) {
			best = r
		}
		if best == i {
			return
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
}

// newRanker gathers what scoring every change shares: the symptoms'
// upstream and downstream, the field walks' scope and earlier incidents.
func newRanker(ctx context.Context, db *store.DB, g Graph, inc *Incident, opts DiagnoseOptions) (*ranker, error) {
	r := &ranker{ctx: ctx, g: g, opts: opts, inc: inc, symptoms: map[string][]Symptom{}, readers: map[string][]FieldReader{},
		kinds: map[kindKey]kindBound{}}
	for _, s := range inc.Symptoms {
		r.symptoms[s.Asset] = append(r.symptoms[s.Asset], s)
	}
	r.up, r.down = map[string]Hop{}, map[string]Hop{}
	if g != nil {
		var err error
		// The upstream set is also the field-reader walks' scope: only a
		// job on the way to the symptoms can make a broken field a cause,
		// so a walk never needs to leave it (see fields).
		if r.up, r.scope, err = g.UpstreamScope(ctx, inc.Assets, opts.MaxDepth); err != nil {
			return nil, fmt.Errorf("walk lineage upstream of %s: %w", strings.Join(inc.Assets, ", "), err)
		}
		if r.down, err = g.Downstream(ctx, inc.Assets, opts.MaxDepth); err != nil {
			return nil, fmt.Errorf("walk lineage downstream of %s: %w", strings.Join(inc.Assets, ", "), err)
		}
		if r.up == nil {
			r.up = map[string]Hop{}
		}
		if r.down == nil {
			r.down = map[string]Hop{}
		}
	}
	// Symptomatic assets unknown to the graph still relate to changes
	// recorded on them.
	for _, a := range inc.Assets {
		r.up[a] = Hop{}
	}
	var err error
	if r.history, err = pastTopCauses(ctx, db, inc); err != nil {
		return nil, err
	}
	return r, nil
}

// boundWalks turns on the second bound in rankWindow (a change read in
// full is walked only when its bound without the walk is still the best
// left); tests turn it off, so each change read in full is walked at once.
var boundWalks = true

// pastTopCauses maps change kinds to earlier incidents on the same assets
// whose top-ranked cause was of that kind.
func pastTopCauses(ctx context.Context, db *store.DB, inc *Incident) (map[changelog.ChangeKind][]pastCause, error) {
	out := map[changelog.ChangeKind][]pastCause{}
	if len(inc.Assets) == 0 {
		return out, nil
	}
	args := []any{inc.ID, store.Millis(inc.Onset)}
	for _, a := range inc.Assets {
		args = append(args, a)
	}
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT i.id, i.onset_ms, i.top_cause_kind FROM incidents i
		JOIN incident_assets a ON a.incident_id = i.id
		WHERE i.id <> ? AND i.top_cause_kind <> '' AND i.onset_ms < ? AND a.asset IN (`+questionMarks(len(inc.Assets))+`)
		ORDER BY i.onset_ms, i.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("read earlier incidents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, kind string
		var onset int64
		if err := rows.Scan(&id, &onset, &kind); err != nil {
			return nil, err
		}
		out[changelog.ChangeKind(kind)] = append(out[changelog.ChangeKind(kind)], pastCause{id: id, onset: store.FromMillis(onset)})
	}
	return out, rows.Err()
}

// questionMarks is "?, ?, ?" for an IN list of n bound values.
func questionMarks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Factor weights; see Diagnose.
const (
	weightFit     = 0.35
	weightTiming  = 0.30
	weightFields  = 0.25
	weightHistory = 0.10
	timingHalf    = 12 * time.Hour
)

// evidence collects the sentences of one cause; when explain is false it
// records nothing, so the scoring pass over every change formats nothing.
// A cause lists at most maxEvidence sentences of at most evidenceChars
// each (a change of 500 fields read by a thousand jobs would otherwise
// explain itself in megabytes) and says how many more there were.
type evidence struct {
	explain bool
	lines   []string
	more    int
}

// Bounds on one cause's explanation.
const (
	maxEvidence   = 20
	evidenceChars = 500
	maxReaders    = 20
	namedFields   = 10
)

func (e *evidence) add(format string, args ...any) {
	if e.explain {
		e.addLine(fmt.Sprintf(format, args...))
	}
}

func (e *evidence) addLine(line string) {
	if !e.explain {
		return
	}
	line = clipLine(line, evidenceChars)
	switch {
	case slices.Contains(e.lines, line):
	case len(e.lines) < maxEvidence:
		e.lines = append(e.lines, line)
	default:
		e.more++
	}
}

// list is the sentences, with a last one counting those left out.
func (e *evidence) list() []string {
	if e.more > 0 {
		return append(e.lines, fmt.Sprintf("… and %d more like these", e.more))
	}
	return e.lines
}

// clipLine cuts a sentence to at most n bytes on a rune boundary.
func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// nameList names the first n of names and counts the rest.
func nameList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// score computes a change's factors and confidence and, when explain is
// set, its path and evidence.
func (r *ranker) score(c *changelog.Change, explain bool) (Cause, error) {
	cause := Cause{At: c.At, Distance: -1}
	if explain {
		// The cause carries the change as answers list it (its first
		// assets and fields); the scoring below reads the whole change, c.
		cause.Change = c.Bounded()
		cause.Path, cause.Readers = []string{}, []string{}
	}
	ev := &evidence{explain: explain}
	onset, onsetEnd := r.inc.Onset, r.inc.OnsetEnd
	lead := onset.Sub(c.At)
	f := &cause.Factors

	// Lineage.
	changed, dist := r.relate(&cause, c)
	f.Lineage = lineageFactor(cause.Relation, dist)

	f.Timing = r.timing(c.At)

	if explain {
		cause.LeadTime = formatLead(lead)
		what := fmt.Sprintf("%s (%s on %s", c.Summary, c.Kind, c.System)
		if c.Actor != "" {
			what += " by " + c.Actor
		}
		what += fmt.Sprintf(") at %s, %s the onset at %s", clockTime(c.At, onset), cause.LeadTime, clockTime(onset, onset))
		if fs := changelog.DescribeFields(c.Fields); fs != "" {
			what += "; it " + fs
		}
		ev.addLine(what)
		if c.StateSkipped {
			ev.addLine("the restore skipped operator state: stateful results (sums, counts, sessions) restart from nothing")
		}
		r.explainRelation(&cause, c, changed, ev)
		switch {
		case lead <= 0 && !c.At.After(onsetEnd) && onsetEnd.After(onset):
			ev.add("it falls inside the first anomalous bucket (%s–%s), where the problem began", clockTime(onset, onset), clockTime(onsetEnd, onset))
		case c.At.After(onsetEnd):
			ev.add("it took effect %s after the first anomalous bucket ended, within the %s a recorded change time may lag", formatDuration(c.At.Sub(onsetEnd)), formatDuration(r.opts.Grace))
		}
	}

	// Fields.
	if err := r.fields(&cause, c, ev); err != nil {
		return cause, err
	}

	// Fit: the best over the incident's symptoms.
	best := SymptomKind("")
	for _, s := range r.inc.Symptoms {
		if v := fitOf(c, s.Kind, f.Fields >= 1); v > f.Fit {
			f.Fit, best = v, s.Kind
		}
	}
	if best != "" && explain {
		ev.addLine(fitReason(c, best, f.Fields >= 1))
	}

	// History.
	if past := r.history[c.Kind]; len(past) > 0 {
		f.History = 1
		if explain {
			ids := make([]string, 0, len(past))
			for _, p := range past {
				ids = append(ids, fmt.Sprintf("%s (onset %s)", p.id, p.onset.UTC().Format("2 Jan 15:04")))
			}
			ev.add("this feed broke the same way before: %s had a %s change as top cause", strings.Join(ids, ", "), c.Kind)
		}
	}

	cause.score = round3(rawScore(*f))
	if !explain {
		return cause, nil // ranking needs the score only
	}
	// The confidence is set over the whole ranking (calibrate).
	cause.Confidence = cause.score
	cause.NotCredible = missingLegs(cause)
	cause.Credible = len(cause.NotCredible) == 0
	f.Lineage, f.Timing, f.Fit, f.Fields = round3(f.Lineage), round3(f.Timing), round3(f.Fit), round3(f.Fields)
	cause.Evidence = ev.list()
	if cause.Evidence == nil {
		cause.Evidence = []string{}
	}
	return cause, nil
}

// timing is the timing factor of a change at this time: halving every
// timingHalf before the onset, 1 from the onset to the end of the first
// anomalous bucket, then falling over the grace.
func (r *ranker) timing(at time.Time) float64 {
	lead, after := r.inc.Onset.Sub(at), at.Sub(r.inc.OnsetEnd)
	switch {
	case lead > 0:
		// 0.5^x as 2^-x: equal to within the last bit (none of 10M
		// random leads rounds to another third decimal), and several
		// times quicker than math.Pow for a factor of most changes.
		return math.Exp2(-float64(lead) / float64(timingHalf))
	case after <= 0 || at.Equal(r.inc.Onset):
		return 1
	default:
		return 0.9 - 0.2*math.Min(1, float64(after)/float64(r.opts.Grace))
	}
}

// bound is the most a change with this key and lineage factor can score:
// its lineage, timing and history factors (its assets, time and kind
// decide them), its fields factor when it lists no field changes (else at
// its most, 1), and the best fit its kind has for any of the symptoms
// with the fields it may have changed; through the same sum and rounding
// as its score, so the bound is never under the score (the sum grows with
// every factor, and so does rounding).
func (r *ranker) bound(k *changelog.Key, lineage float64) float64 {
	fields := 1.0
	if k.NoFields {
		fields = 0.5 // as fields scores a change without field changes
	}
	kb := r.keyBound(k)
	return round3(rawScore(Factors{Lineage: lineage, Fit: kb.fit, Timing: r.timing(k.At), Fields: fields, History: kb.history}))
}

// keyBound is the fit and history factors bound gives a change of the
// key's kind, fields and state (a few distinct ones per window, so they
// are worked out once each): fitOf over every symptom and over the
// fields the change may have changed (breaking or not, unless it lists
// none).
func (r *ranker) keyBound(k *changelog.Key) kindBound {
	kk := kindKey{k.Kind, k.NoFields, k.StateSkipped}
	if kb, ok := r.kinds[kk]; ok {
		return kb
	}
	var kb kindBound
	if len(r.history[k.Kind]) > 0 {
		kb.history = 1
	}
	variants := [][]changelog.FieldChange{nil}
	if !k.NoFields {
		variants = append(variants, []changelog.FieldChange{{How: changelog.FieldRemoved}})
	}
	for _, s := range r.inc.Symptoms {
		for _, fs := range variants {
			c := changelog.Change{Kind: k.Kind, Fields: fs, StateSkipped: k.StateSkipped}
			for _, readBreak := range []bool{false, true} {
				kb.fit = max(kb.fit, fitOf(&c, s.Kind, readBreak))
			}
		}
	}
	r.kinds[kk] = kb
	return kb
}

type kindKey struct {
	kind                   changelog.ChangeKind
	noFields, stateSkipped bool
}

type kindBound struct{ fit, history float64 }

// rank is a change's score as score computes it, without the words: the
// pass over every change in the window.
func (r *ranker) rank(c *changelog.Change) (float64, error) {
	cause, err := r.score(c, false)
	return cause.score, err
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// relate finds the changed asset nearest the symptoms, sets the relation
// and distance, and returns that asset.
func (r *ranker) relate(cause *Cause, c *changelog.Change) (string, int) {
	changed, rel, dist := r.relation(c)
	cause.Relation = rel
	if rel == RelationSame || rel == RelationUpstream {
		cause.Distance = dist
	}
	return changed, dist
}

// relation is the changed asset nearest the symptoms, its relation to them
// and its distance (-1 when unrelated).
func (r *ranker) relation(c *changelog.Change) (string, string, int) {
	best, bestD := "", math.MaxInt
	for _, a := range c.Assets {
		if h, ok := r.up[a]; ok && h.Distance < bestD {
			best, bestD = a, h.Distance
		}
	}
	if best != "" {
		if bestD == 0 {
			return best, RelationSame, 0
		}
		return best, RelationUpstream, bestD
	}
	for _, a := range c.Assets {
		if h, ok := r.down[a]; ok && h.Distance < bestD {
			best, bestD = a, h.Distance
		}
	}
	if best != "" {
		return best, RelationDownstream, bestD
	}
	return "", RelationUnrelated, -1
}

// lineageFactor scores a relation to the symptoms; see Diagnose.
func lineageFactor(rel string, dist int) float64 {
	switch rel {
	case RelationSame:
		return 1
	case RelationUpstream:
		return math.Max(0.4, 1-0.08*float64(dist-1))
	case RelationDownstream:
		return 0.05
	}
	return 0.2
}

// explainRelation fills the path and says how the changed asset relates to
// the symptoms.
func (r *ranker) explainRelation(cause *Cause, c *changelog.Change, changed string, ev *evidence) {
	switch cause.Relation {
	case RelationSame:
		cause.Path = []string{changed}
		ev.add("it changed %s itself, where %s", changed, r.where(changed))
	case RelationUpstream:
		cause.Path = pathFrom(r.up, changed)
		target := cause.Path[len(cause.Path)-1]
		ev.add("%s is %d hop(s) upstream of %s (%s), where %s", changed, cause.Distance, target,
			strings.Join(cause.Path, " → "), r.where(target))
	case RelationDownstream:
		cause.Path = pathFrom(r.down, changed)
		ev.add("%s is downstream of %s: it reads the symptomatic data and cannot have fed it", changed, cause.Path[len(cause.Path)-1])
	default:
		ev.add("no recorded lineage connects %s to the symptomatic assets (%s) within %d hops; lineage may be incomplete",
			strings.Join(c.Assets, ", "), strings.Join(r.inc.Assets, ", "), r.opts.MaxDepth)
	}
}

// where describes the symptoms on an asset.
func (r *ranker) where(asset string) string {
	var parts []string
	for _, s := range r.symptoms[asset] {
		if d := s.describe(); !slices.Contains(parts, d) {
			parts = append(parts, d)
		}
		if len(parts) == 3 {
			break
		}
	}
	if len(parts) == 0 {
		return "the symptoms are"
	}
	return strings.Join(parts, "; ")
}

// fields scores whether jobs on the path read what the change broke.
func (r *ranker) fields(cause *Cause, c *changelog.Change, ev *evidence) error {
	f := &cause.Factors
	if len(c.Fields) == 0 {
		f.Fields = 0.5
		return nil
	}
	broken := map[string][]string{} // asset -> field names
	for _, fc := range c.Fields {
		if fc.How.Breaks() {
			broken[fc.Asset] = append(broken[fc.Asset], fc.Name)
		}
	}
	if len(broken) == 0 {
		f.Fields = 0.3
		ev.addLine("it only added fields, which existing readers do not depend on")
		return nil
	}
	f.Fields = 0.35
	if cause.Relation != RelationSame && cause.Relation != RelationUpstream {
		return nil
	}
	assets := make([]string, 0, len(broken))
	for a := range broken {
		assets = append(assets, a)
	}
	sort.Strings(assets)
	var all []string
	for _, asset := range assets {
		names := broken[asset]
		sort.Strings(names)
		all = append(all, names...)
		// A broken field that is itself a symptomatic column.
		for _, s := range r.symptoms[asset] {
			if s.Column != "" && slices.Contains(names, s.Column) {
				f.Fields = 1
				ev.add("the changed field %s is the symptomatic column of %s", s.Column, asset)
			}
		}
		if f.Fields >= 1 && !ev.explain {
			continue // already certain; the readers are only named when explaining
		}
		if r.bounding {
			// Upper bound: a reader on the path may read it.
			f.Fields, r.walked = 1, false
			continue
		}
		readers, err := r.fieldReaders(asset, names)
		if err != nil {
			return err
		}
		for _, rd := range readers {
			if _, onPath := r.up[rd.Reader]; !onPath {
				continue
			}
			f.Fields = 1
			if !ev.explain {
				continue
			}
			if !slices.Contains(cause.Readers, rd.Reader) {
				if len(cause.Readers) < maxReaders {
					cause.Readers = append(cause.Readers, rd.Reader)
				}
				cause.ReadersTotal++
			}
			line := rd.Reader + " reads " + rd.Field
			if rd.From != "" && rd.From != asset {
				line += " from " + rd.From
			}
			if rd.Evidence != "" {
				line += " (" + rd.Evidence + ")"
			}
			ev.addLine(line)
		}
	}
	if f.Fields < 1 {
		ev.add("no job on the path to the symptoms is recorded reading %s", nameList(all, namedFields))
	}
	return nil
}

func (r *ranker) fieldReaders(asset string, names []string) ([]FieldReader, error) {
	if r.g == nil {
		return nil, nil
	}
	key := asset + "\x00" + strings.Join(names, "\x00")
	if got, ok := r.readers[key]; ok {
		return got, nil
	}
	got, err := r.g.FieldReaders(r.ctx, asset, names, r.opts.MaxDepth, r.scope)
	if err != nil {
		return nil, fmt.Errorf("find readers of %s on %s: %w", strings.Join(names, ", "), asset, err)
	}
	sort.SliceStable(got, func(i, j int) bool {
		if got[i].Reader != got[j].Reader {
			return got[i].Reader < got[j].Reader
		}
		return got[i].Field < got[j].Field
	})
	r.readers[key] = got
	return got, nil
}

func breaksFields(c *changelog.Change) bool {
	for _, f := range c.Fields {
		if f.How.Breaks() {
			return true
		}
	}
	return false
}

// fitOf scores how a kind of change explains a kind of symptom. readBreak
// is true when a job on the path reads a field the change removed, renamed
// or retyped.
func fitOf(c *changelog.Change, k SymptomKind, readBreak bool) float64 {
	breaking := breaksFields(c)
	// A row is a short list, not a map: fitOf runs for every change in
	// the window, and building a map on each call costs more than looking
	// through a few pairs.
	type fit struct {
		k SymptomKind
		v float64
	}
	type row []fit
	pick := func(m row, def float64) float64 {
		for _, e := range m {
			if e.k == k {
				return e.v
			}
		}
		return def
	}
	switch c.Kind {
	case changelog.ChangeSchemaVersion:
		if breaking {
			return pick(row{{SymptomNulls, 1}, {SymptomValue, 0.6}, {SymptomVolume, 0.5}, {SymptomDivergence, 0.5}}, 0.3)
		}
		return pick(row{{SymptomNulls, 0.4}}, 0.3)
	case changelog.ChangeRestore:
		if c.StateSkipped {
			return pick(row{{SymptomValue, 1}, {SymptomDivergence, 0.8}, {SymptomVolume, 0.5}, {SymptomUniqueness, 0.5}, {SymptomFreshness, 0.4}, {SymptomLoadLag, 0.4}}, 0.3)
		}
		return pick(row{{SymptomVolume, 0.6}, {SymptomUniqueness, 0.6}, {SymptomValue, 0.5}, {SymptomFreshness, 0.5}, {SymptomLoadLag, 0.5}, {SymptomDivergence, 0.4}}, 0.2)
	case changelog.ChangePipeline:
		return pick(row{{SymptomVolume, 1}, {SymptomFreshness, 0.8}, {SymptomLoadLag, 0.8}}, 0.5)
	case changelog.ChangePartitioning:
		return pick(row{{SymptomUniqueness, 1}, {SymptomDivergence, 0.9}, {SymptomVolume, 0.5}, {SymptomValue, 0.5}, {SymptomLoadLag, 0.4}}, 0.3)
	case changelog.ChangeConnector:
		if breaking && k == SymptomNulls {
			return 0.9
		}
		return pick(row{{SymptomFreshness, 0.9}, {SymptomLoadLag, 0.9}, {SymptomVolume, 0.8}, {SymptomNulls, 0.6}, {SymptomUniqueness, 0.6}}, 0.4)
	case changelog.ChangeConfig:
		return pick(row{{SymptomFreshness, 0.6}, {SymptomLoadLag, 0.6}, {SymptomVolume, 0.6}}, 0.4)
	}
	// deploy, release
	if breaking && k == SymptomNulls {
		return 0.8
	}
	return pick(row{{SymptomNulls, 0.5}}, 0.4)
}

// fitReason says in words why a kind of change fits a kind of symptom as
// well as fitOf scored it.
func fitReason(c *changelog.Change, k SymptomKind, readBreak bool) string {
	breaking := breaksFields(c)
	switch c.Kind {
	case changelog.ChangeSchemaVersion:
		switch {
		case breaking && readBreak && k == SymptomNulls:
			return "a field removed or changed in a schema while a job still reads it shows up downstream as nulls"
		case breaking:
			return fmt.Sprintf("a schema version that removes or changes fields can cause %s problems in what is built from it", k)
		}
		return "a schema version that only adds fields seldom breaks readers"
	case changelog.ChangeRestore:
		switch {
		case c.StateSkipped && (k == SymptomValue || k == SymptomDivergence):
			return "a restore that skipped state restarts aggregates from zero: values collapse while the job runs green"
		case c.StateSkipped:
			return fmt.Sprintf("a restore that skipped state can cause %s problems", k)
		}
		return "a restore replays or skips input around the snapshot, which shows as duplicates, gaps or lag"
	case changelog.ChangePipeline:
		if fitOf(c, k, readBreak) >= 0.8 {
			return fmt.Sprintf("a pipeline change that stops, skips or reroutes a step leaves a %s gap", k)
		}
		return fmt.Sprintf("a pipeline change can cause %s problems", k)
	case changelog.ChangePartitioning:
		if fitOf(c, k, readBreak) >= 0.9 {
			return "a change of keying or partitioning splits sessions and keys across partitions: duplicates and metrics that move apart"
		}
		return fmt.Sprintf("a change of keying or partitioning can cause %s problems", k)
	case changelog.ChangeConnector:
		return fmt.Sprintf("a connector change alters what lands and when: it commonly shows as %s problems", k)
	case changelog.ChangeConfig:
		return fmt.Sprintf("a configuration change can cause %s problems", k)
	}
	if breaking && k == SymptomNulls {
		return "a deploy that removes or changes fields its readers use shows up downstream as nulls"
	}
	return fmt.Sprintf("a code deploy can cause %s problems, but nothing in it points to this one", k)
}

func diagnosisSummary(d *Diagnosis) string {
	if len(d.Causes) == 0 {
		return fmt.Sprintf("%s: no credible cause: no recorded change between %s and %s; record the changes you know of (record_change) and diagnose again.",
			d.IncidentID, d.Window.Start.Format(time.RFC3339), d.Window.End.Format(time.RFC3339)) + attributedNote(d.Attributed)
	}
	top := d.Causes[0]
	if !top.Credible {
		names := make([]string, 0, 3)
		for _, c := range d.Causes[:min(3, len(d.Causes))] {
			names = append(names, fmt.Sprintf("%s (%s, %.2f: %s)", c.Change.Summary, c.Relation, c.Confidence, legsText(c.NotCredible)))
		}
		s := fmt.Sprintf("%s: no credible cause. %d change(s) considered, none with both a lineage path to %s and a timing fit (at most %s before the onset): %s. "+
			"Lineage may be incomplete: record it, or name the cause yourself (dw cause set %s <change-id> --reason ...).",
			d.IncidentID, d.Considered, strings.Join(d.Assets, ", "), formatDuration(timingFitLead), strings.Join(names, "; "), d.IncidentID)
		return s + attributedNote(d.Attributed)
	}
	s := fmt.Sprintf("%s: %d change(s) considered. Most likely cause (confidence %.2f): %s, %s the onset",
		d.IncidentID, d.Considered, top.Confidence, top.Change.Summary, top.LeadTime)
	if top.Relation == RelationUpstream {
		s += fmt.Sprintf(", %d hop(s) upstream", top.Distance)
	}
	if len(top.Readers) > 0 {
		s += "; read by " + strings.Join(top.Readers, ", ")
	}
	if len(d.Causes) > 1 {
		s += fmt.Sprintf(". Next: %s (%.2f)", d.Causes[1].Change.Summary, d.Causes[1].Confidence)
	}
	return s + "." + attributedNote(d.Attributed)
}

func attributedNote(a *Attribution) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf(" %s named the cause: %s (change %d): %s.", a.Actor, a.Change.Summary, a.Change.ID, a.Reason)
}
