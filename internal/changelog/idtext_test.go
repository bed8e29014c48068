package changelog

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dataworkers/dw/internal/clock"
	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

// record_change's assets follow the one asset id text rule: a control
// character, an invisible format character or invalid UTF-8 is refused.
func TestCleanAssetFollowsTheIDRule(t *testing.T) {
	for _, c := range []struct {
		in string
		r  rune
	}{
		{"kafka://prod/a\x00", 0}, {"kafka://prod/a\x1b[2K", 0x1b}, {"airflow://dag/sync\u200b", 0x200b},
		{"airflow://dag/\u202esync", 0x202e}, {"kafka://prod/\ufeffa", 0xfeff}, {"kafka://prod/\xffa", 0xfffd},
	} {
		_, err := CleanAsset("assets[0]", c.in)
		want := "assets[0]: asset id " + (&lineage.IDTextError{Rune: c.r, Pos: posOf(c.in, c.r), BadUTF8: c.r == 0xfffd}).Reason()
		if !errors.Is(err, ErrInvalid) || err.Error() != want {
			t.Errorf("%q:\n got %v\nwant %s", c.in, err, want)
		}
	}
	if a, err := CleanAsset("assets[0]", " kafka://prod/café "); err != nil || a != "kafka://prod/café" {
		t.Errorf("a valid id: %q, %v", a, err)
	}
}

// posOf is where r (or, for U+FFFD, the first byte that is not UTF-8)
// stands, counted in characters from 1.
func posOf(s string, r rune) int {
	n := 0
	for _, x := range s {
		n++
		if x == r {
			return n
		}
	}
	return 0
}

// A change's text follows the free-text rule proposals follow: the
// hostile summary that recoloured the terminal and forged a second line
// ("…dropped\x1b[8m\n  Runs exactly this: nothing") is refused naming the
// field, the character and where, on both stores, and nothing is stored.
func TestRecordChangeRefusesUnshownText(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		l := &Log{DB: db, Clock: clock.NewFake(tue(15, 0))}
		for _, c := range []struct {
			field string
			edit  func(p *RecordChangeParams)
			r     rune
			pos   int
			kind  string
		}{
			{"summary", func(p *RecordChangeParams) { p.Summary = "egress_bytes dropped\x1b[8m\n  Runs exactly this: nothing" }, 0x1b, 21, "a control character"},
			{"summary", func(p *RecordChangeParams) { p.Summary = "a\nb" }, '\n', 2, "a line break"},
			{"actor", func(p *RecordChangeParams) { p.Actor = "ev\x1b[1mil" }, 0x1b, 3, "a control character"},
			{"key", func(p *RecordChangeParams) { p.Key = "k\u202e1" }, 0x202e, 2, "an invisible formatting character"},
			{"system", func(p *RecordChangeParams) { p.System = "dbt\u200b" }, 0x200b, 4, "an invisible formatting character"},
			{"source", func(p *RecordChangeParams) { p.Source = "x\x00" }, 0, 2, "a control character"},
			{"summary", func(p *RecordChangeParams) { p.Summary = "long\u009bstring" }, 0x9b, 5, "a control character"},
		} {
			p := schemaV12()
			p.Fields = append([]FieldChange{}, p.Fields...)
			c.edit(&p)
			_, err := l.RecordChange(ctx, p)
			want := fmt.Sprintf("%s holds %U (%s) at character %d; it is one line of plain text: no control characters and no invisible formatting (zero-width, bidi), so the change reads as it is shown",
				c.field, c.r, c.kind, c.pos)
			if !errors.Is(err, ErrInvalid) || err.Error() != want {
				t.Errorf("%s:\n got %v\nwant %s", c.field, err, want)
			}
		}
		list, err := l.ListChanges(ctx, ChangeFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Changes) != 0 {
			t.Fatalf("refused changes were stored: %d", len(list.Changes))
		}
		// Printable text beyond ASCII is kept.
		p := schemaV12()
		p.Summary, p.Actor = "Größe → bytes, 日本", "zoë"
		if got := recordOK(t, l, p); got.Summary != p.Summary || got.Actor != p.Actor {
			t.Errorf("printable text changed: %q %q", got.Summary, got.Actor)
		}
	})
}
