package schemahistory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dataworkers/dw/internal/changelog"
	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/compat"
	"github.com/dataworkers/dw/internal/registry"
	"github.com/dataworkers/dw/internal/registry/registrytest"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// Version 12 of the billing subject drops response_bytes for
// response_kib.
const (
	billing = "api-usage-value"
	bill11  = `{"type":"record","name":"ApiUsage","fields":[{"name":"usage_id","type":"string"},
		{"name":"response_bytes","type":["null","long"],"default":null}]}`
	bill12 = `{"type":"record","name":"ApiUsage","fields":[{"name":"usage_id","type":"string"},
		{"name":"response_kib","type":["null","double"],"default":null}]}`
)

func billingSources(t *testing.T, db *store.DB, clk clock.Clock) (*registrytest.Server, Sources) {
	t.Helper()
	r := registrytest.New(t)
	if _, err := r.SeedVersions(billing, compat.Backward,
		registrytest.Seeded{Schema: bill11, Version: 11}, registrytest.Seeded{Schema: bill12, Version: 12}); err != nil {
		t.Fatal(err)
	}
	rc, err := registry.New(registry.Config{URL: r.URL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r, Sources{
		Registry:  func() (*registry.Client, error) { return rc, nil },
		ChangeLog: func(context.Context) (*changelog.Log, error) { return &changelog.Log{DB: db, Clock: clk}, nil },
		Clock:     clk,
		Source:    "dw-connectors",
	}
}

// TestReadLatestVersionRecordsOnce reads version 12, diffs it against 11,
// records it in the change log dated when first seen, and on a later read
// finds the same entry.
func TestReadLatestVersionRecordsOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		first := time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)
		clk := clock.NewFake(first)
		_, src := billingSources(t, db, clk)

		lv, err := ReadLatestVersion(ctx, src, "  "+billing+" ")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := compat.Canonicalize(compat.Avro, compat.Schema{Text: bill12})
		if lv.Version.Version != 12 || lv.Compatibility != string(compat.Backward) || lv.LevelSource != "subject" ||
			lv.Facts.Previous != 11 || len(lv.Facts.Versions) != 2 || lv.Facts.SHA256 != want.SHA256 || len(lv.Notes) != 0 {
			t.Fatalf("latest: %+v facts %+v", lv, lv.Facts)
		}
		ch := lv.Change
		if ch == nil || !ch.Created || ch.Key != "schema-registry:api-usage-value:12" || !ch.At.Equal(first) || ch.Note != FirstSeenNote {
			t.Fatalf("change: %+v", ch)
		}
		list, err := (&changelog.Log{DB: db, Clock: clk}).ListChanges(ctx, changelog.ChangeFilter{Asset: "schema://" + billing})
		if err != nil || len(list.Changes) != 1 {
			t.Fatalf("changes: %+v %v", list, err)
		}
		c := list.Changes[0]
		if c.Summary != "api-usage-value version 12 (schema id "+c.Details["schema_id"]+"): removed response_bytes; added response_kib" ||
			c.Source != "dw-connectors" || c.Details["previous_version"] != "11" || c.Details["sha256"] != want.SHA256 {
			t.Errorf("recorded: %+v", c)
		}

		clk.Advance(time.Hour)
		again, err := ReadLatestVersion(ctx, src, billing)
		if err != nil {
			t.Fatal(err)
		}
		if again.Change == nil || again.Change.Created || again.Change.ID != ch.ID || !again.Change.At.Equal(first) {
			t.Errorf("second read: %+v", again.Change)
		}
	})
}

// TestReadLatestVersionWithoutTheStore: a change log that cannot be
// opened is a note; the registry's answer still stands.
func TestReadLatestVersionWithoutTheStore(t *testing.T) {
	_, src := billingSources(t, nil, clock.NewFake(time.Now()))
	src.ChangeLog = func(context.Context) (*changelog.Log, error) { return nil, errors.New("store is read-only") }
	lv, err := ReadLatestVersion(context.Background(), src, billing)
	if err != nil {
		t.Fatal(err)
	}
	if lv.Change != nil || lv.Version.Version != 12 || len(lv.Notes) != 1 || lv.Notes[0] != "not recorded in the change log: store is read-only" {
		t.Errorf("%+v", lv)
	}
}

// TestReadLatestVersionRefusals: an empty subject is refused before a
// client is built; an unknown one is the registry's error.
func TestReadLatestVersionRefusals(t *testing.T) {
	built := false
	src := Sources{Registry: func() (*registry.Client, error) { built = true; return nil, errors.New("no registry") }}
	if _, err := ReadLatestVersion(context.Background(), src, " "); err == nil || built {
		t.Errorf("empty subject: %v (client built %v)", err, built)
	}
	_, src = billingSources(t, nil, clock.NewFake(time.Now()))
	var nf *registry.SubjectNotFoundError
	if _, err := ReadLatestVersion(context.Background(), src, "api-usage-valeu"); !errors.As(err, &nf) {
		t.Errorf("unknown subject: %v", err)
	}
}

// TestRecordVersionFields: the change log gets an operation for each
// field change it knows and the rest as details.
func TestRecordVersionFields(t *testing.T) {
	fields, other := fieldChanges([]compat.Change{
		{Kind: compat.Removed, Path: "a", Old: "long"},
		{Kind: compat.Renamed, OldPath: "b", Path: "c"},
		{Kind: compat.TypeChanged, Path: "d", Old: "int", New: "long"},
		{Kind: compat.DefaultChanged, Path: "e"},
	})
	if len(fields) != 3 || fields[1].Name != "b" || fields[1].NewName != "c" || fields[2].Detail != "int -> long" || len(other) != 1 {
		t.Fatalf("fields %+v other %v", fields, other)
	}
	if got := describeFields(fields); got != "removed a; changed the type of d; renamed b to c" {
		t.Errorf("describe: %q", got)
	}
}

// TestLatestVersionSummary: each line of the summary says one thing read
// from the result: the version, the changes from the one before (or that
// there were none), whether this read recorded it, and the notes.
func TestLatestVersionSummary(t *testing.T) {
	at := time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC)
	removed := compat.Change{Kind: compat.Removed, Path: "response_bytes", Old: `["null","long"]`}
	added := compat.Change{Kind: compat.Added, Path: "response_kib", New: `["null","double"]`}
	lv := &LatestVersion{
		Version:       &registry.SchemaVersion{Subject: billing, Version: 12, ID: 7},
		Compatibility: string(compat.Backward), LevelSource: "subject",
		Facts:  &VersionFacts{Versions: []int{11, 12}, Previous: 11, Changes: []compat.Change{removed, added}},
		Change: &RecordedVersion{ID: 4, Created: true, At: at},
		Notes:  []string{"canonical hash not computed: x"},
	}
	want := []string{
		"api-usage-value version 12 (schema id 7, AVRO), compatibility BACKWARD (subject)",
		"from version 11:",
		"- " + removed.String(),
		"- " + added.String(),
		"recorded in the change log as change 4 at 2026-03-10T14:00:00Z (first seen; the registry gives no registration time)",
		"note: canonical hash not computed: x",
	}
	if got := strings.Split(lv.Summary(), "\n"); !slices.Equal(got, want) {
		t.Errorf("first read:\n got %q\nwant %q", got, want)
	}

	// A later read of a version with no field changes, whose level could
	// not be read: no compatibility, "already" recorded.
	lv.Compatibility, lv.Facts.Changes, lv.Notes = "", nil, nil
	lv.Version.SchemaType = "PROTOBUF"
	lv.Change.Created = false
	want = []string{
		"api-usage-value version 12 (schema id 7, PROTOBUF)",
		"no field changes from version 11",
		"already in the change log as change 4, first seen 2026-03-10T14:00:00Z",
	}
	if got := strings.Split(lv.Summary(), "\n"); !slices.Equal(got, want) {
		t.Errorf("later read:\n got %q\nwant %q", got, want)
	}

	// A first version, not recorded: only the version line.
	first := &LatestVersion{Version: &registry.SchemaVersion{Subject: billing, Version: 1, ID: 1}, Facts: &VersionFacts{}}
	if got := first.Summary(); got != "api-usage-value version 1 (schema id 1, AVRO)" {
		t.Errorf("first version: %q", got)
	}
}
