package connectors

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/dataworkers/dw/internal/lineage"
	"github.com/dataworkers/dw/internal/lineage/ingest"
	"github.com/dataworkers/dw/internal/lineage/lineagetest"
)

// TestEmitLineageRefusesBadDatasetNames: without a proposal the event is
// only stored, and still a dataset or job name the asset id rule refuses
// (ESC, CR, LF, a zero-width space) is an invalid field, named by its
// path, and nothing is stored or posted.
func TestEmitLineageRefusesBadDatasetNames(t *testing.T) {
	ctx := context.Background()
	g := newLineageGate(t)
	reason := func(r rune, pos int) string { return (&lineage.IDTextError{Rune: r, Pos: pos}).Reason() }
	cases := []struct {
		edit func(ev map[string]any)
		want []ingest.FieldError
	}{
		{func(ev map[string]any) {
			ev["inputs"] = []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "evil\x1b[2K\x1b[1A\rbilling.t0"}}
		}, []ingest.FieldError{{Field: "inputs[0].name", Message: reason(0x1b, 5)}}},
		{func(ev map[string]any) {
			ev["outputs"] = []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "line1\nbilling.fake"}}
		}, []ingest.FieldError{{Field: "outputs[0].name", Message: reason('\n', 6)}}},
		{func(ev map[string]any) {
			ev["outputs"] = []any{map[string]any{"namespace": "kafka://broker-1:9092", "name": "usage-hourly\u200b"}}
		}, []ingest.FieldError{{Field: "outputs[0].name", Message: reason(0x200b, 13)}}},
		{func(ev map[string]any) { ev["job"].(map[string]any)["name"] = "usage\rrollup" },
			[]ingest.FieldError{{Field: "job.name", Message: reason('\r', 6)}}},
	}
	for i, c := range cases {
		ev := rollupEvent(t)
		c.edit(ev)
		_, _, err := g.h.emitLineage(ctx, EmitLineageIn{Event: ev})
		var ve *ingest.ValidationError
		if !errors.As(err, &ve) || !reflect.DeepEqual(ve.Problems, c.want) {
			t.Errorf("case %d: %v, want problems %+v", i, err, c.want)
		}
	}
	if n := lineagetest.Count(t, g.db(), "lineage_assets"); n != 0 || g.posts() != 0 {
		t.Errorf("refused events stored %d assets and posted %d", n, g.posts())
	}
}
