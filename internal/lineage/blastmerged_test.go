package lineage

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dataworkers/dw/internal/store"
	"github.com/dataworkers/dw/internal/store/storetest"
)

func TestMergedBlastRadiusMergesSources(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		g, _ := newGraph(t, db)
		ctx := context.Background()
		_, err := g.RecordLineage(ctx, Note{
			Assets: []NoteAsset{
				{ID: "kafka://prod/a", Kind: "topic"},
				{ID: "kafka://prod/b", Kind: "topic"},
				{ID: "duckdb://s.shared", Kind: "table"},
				{ID: "duckdb://s.only_b", Kind: "table"},
				{ID: "airflow://billing_export", Kind: "orchestrator_job", Owner: "finance", Tags: []string{"outbound"},
					Schedule: &Schedule{Cron: "0 6 * * *"}},
			},
			Edges: []NoteEdge{
				{From: "kafka://prod/a", To: "duckdb://s.shared"},
				{From: "kafka://prod/b", To: "duckdb://s.shared"},
				{From: "kafka://prod/b", To: "duckdb://s.only_b"},
				{From: "duckdb://s.shared", To: "airflow://billing_export"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		br, err := g.MergedBlastRadius(ctx, []string{"kafka://prod/a", "kafka://prod/nope", "kafka://prod/b", "kafka://prod/a"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(br.From, ",") != "kafka://prod/a,kafka://prod/b" {
			t.Errorf("from = %v (a source named twice is walked once)", br.From)
		}
		if len(br.NotInGraph) != 1 || br.NotInGraph[0] != "kafka://prod/nope" {
			t.Errorf("not in graph = %v", br.NotInGraph)
		}
		var ids []string
		for _, a := range br.Assets {
			ids = append(ids, a.ID)
		}
		// Critical (and scheduled) first, then by distance, then by id;
		// the shared table once.
		if strings.Join(ids, ",") != "airflow://billing_export,duckdb://s.only_b,duckdb://s.shared" {
			t.Fatalf("assets = %v", ids)
		}
		if br.Critical != 1 || br.Scheduled != 1 || br.More {
			t.Errorf("critical %d scheduled %d more %v", br.Critical, br.Scheduled, br.More)
		}
		if !strings.Contains(br.Summary, "airflow://billing_export [outbound] next run ") || !strings.Contains(br.Summary, "(owner finance)") ||
			!strings.HasPrefix(br.Summary, "Blast radius: 3 asset(s) downstream of kafka://prod/a, kafka://prod/b") {
			t.Errorf("summary = %q", br.Summary)
		}

		// Nothing the catalog knows: unknown, said so, not an error.
		br, err = g.MergedBlastRadius(ctx, []string{"kafka://prod/nope"})
		if err != nil || len(br.From) != 0 || len(br.Assets) != 0 || !strings.HasPrefix(br.Summary, "Blast radius unknown") {
			t.Errorf("unknown only: %+v %v", br, err)
		}
		// A leaf: nothing downstream.
		br, err = g.MergedBlastRadius(ctx, []string{"duckdb://s.only_b"})
		if err != nil || len(br.Assets) != 0 || br.Summary != "Blast radius: nothing recorded downstream of duckdb://s.only_b." {
			t.Errorf("leaf: %+v %v", br, err)
		}
	})
}

func TestMergedBlastRadiusListsAtMost50(t *testing.T) {
	db := storetest.SQLite(t)
	g, _ := newGraph(t, db)
	note := Note{Assets: []NoteAsset{{ID: "kafka://prod/wide", Kind: "topic"}}}
	for i := 0; i < 60; i++ {
		id := fmt.Sprintf("duckdb://s.t%02d", i)
		note.Assets = append(note.Assets, NoteAsset{ID: id, Kind: "table"})
		note.Edges = append(note.Edges, NoteEdge{From: "kafka://prod/wide", To: id})
	}
	if _, err := g.RecordLineage(context.Background(), note); err != nil {
		t.Fatal(err)
	}
	br, err := g.MergedBlastRadius(context.Background(), []string{"kafka://prod/wide"})
	if err != nil {
		t.Fatal(err)
	}
	if len(br.Assets) != mergedListed || !br.More || !strings.Contains(br.Summary, "(more not listed)") {
		t.Errorf("listed %d more=%v summary=%q", len(br.Assets), br.More, br.Summary)
	}
}
