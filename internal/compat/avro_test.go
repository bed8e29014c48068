package compat

import (
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/avro/" + name)
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return string(b)
}

// usageSchema builds the api-usage-value record of the billing story with
// the optional fields given after the common ones.
func usageSchema(optional ...string) string {
	fields := []string{
		`{"name":"usage_id","type":"string"}`,
		`{"name":"account_id","type":"string"}`,
		`{"name":"event_time","type":{"type":"long","logicalType":"timestamp-millis"}}`,
		`{"name":"ingest_time","type":{"type":"long","logicalType":"timestamp-millis"}}`,
		`{"name":"endpoint","type":"string"}`,
		`{"name":"status","type":"int"}`,
	}
	for _, name := range optional {
		fields = append(fields, `{"name":"`+name+`","type":["null","long"],"default":null}`)
	}
	return `{"type":"record","name":"ApiUsage","namespace":"com.example.usage","fields":[` + strings.Join(fields, ",") + `]}`
}

var (
	usageV11 = usageSchema("response_bytes")
	usageV12 = usageSchema("response_kib")
	usageV13 = usageSchema("response_kib", "response_bytes")
)

func mustCheck(t *testing.T, kind Kind, next string, prev []Version, level Level) *Verdict {
	t.Helper()
	v, err := Check(kind, Schema{Text: next}, prev, level)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return v
}

func findReason(rs []Reason, typ, path string) *Reason {
	for i := range rs {
		if rs[i].Type == typ && rs[i].Path == path {
			return &rs[i]
		}
	}
	return nil
}

func findChange(cs []Change, kind ChangeKind, path string) *Change {
	for i := range cs {
		if cs[i].Kind == kind && cs[i].Path == path {
			return &cs[i]
		}
	}
	return nil
}

func TestBillingStoryVersions(t *testing.T) {
	prev := []Version{{Version: 11, Schema: Schema{Text: usageV11}}}
	v12 := mustCheck(t, Avro, usageV12, prev, Backward)
	if !v12.Compatible {
		t.Fatalf("v12 should be BACKWARD compatible with v11 (removing an optional field, adding an optional one): %s", v12.Summary())
	}
	if v12.Latest != 11 || len(v12.At(Backward).Checked) != 1 || v12.At(Backward).Checked[0] != 11 {
		t.Fatalf("v12 checked against %v, latest %d", v12.At(Backward).Checked, v12.Latest)
	}

	prev = append(prev, Version{Version: 12, Schema: Schema{Text: usageV12}})
	v13 := mustCheck(t, Avro, usageV13, prev, Backward)
	if !v13.Compatible {
		t.Fatalf("v13 should be BACKWARD compatible with v12: %s", v13.Summary())
	}
	bt := v13.At(BackwardTransitive)
	if !bt.Compatible || len(bt.Checked) != 2 {
		t.Fatalf("v13 should be BACKWARD_TRANSITIVE compatible with 11 and 12: %+v", bt)
	}
	for _, lv := range v13.Levels {
		if !lv.Compatible {
			t.Errorf("v13 under %s: %+v", lv.Level, lv.Reasons)
		}
	}

	changes, err := Diff(Avro, Schema{Text: usageV11}, Schema{Text: usageV12})
	if err != nil {
		t.Fatal(err)
	}
	rm := findChange(changes, Removed, "response_bytes")
	add := findChange(changes, Added, "response_kib")
	if rm == nil || add == nil || len(changes) != 2 {
		t.Fatalf("diff v11->v12 = %v", changes)
	}
	if rm.Old != "[null,long]" || !strings.Contains(rm.Hint, "likely renamed to response_kib") {
		t.Fatalf("removed response_bytes: %+v", rm)
	}
	changes, err = Diff(Avro, Schema{Text: usageV12}, Schema{Text: usageV13})
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || findChange(changes, Added, "response_bytes") == nil {
		t.Fatalf("diff v12->v13 = %v", changes)
	}
}

func TestMembershipNeedsReferenceAndRemovesDates(t *testing.T) {
	v1 := fixture(t, "demo-scene__membership_v1.avsc")
	v2 := fixture(t, "demo-scene__membership_v2.avsc")
	vp := fixture(t, "demo-scene__validity_period.avsc")

	_, err := Check(Avro, Schema{Text: v2}, Numbered(v1), Backward)
	var pe *ParseError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "io.confluent.devrel.ValidityPeriod") || !strings.Contains(err.Error(), "references") {
		t.Fatalf("v2 without its reference: %v", err)
	}

	next := Schema{Text: v2, References: []string{vp}}
	verdict, err := Check(Avro, next, Numbered(v1), Full)
	if err != nil {
		t.Fatal(err)
	}
	back := verdict.At(Backward)
	if back.Compatible || findReason(back.Reasons, "READER_FIELD_MISSING_DEFAULT_VALUE", "validity_period") == nil {
		t.Fatalf("BACKWARD: %+v", back)
	}
	r := findReason(back.Reasons, "READER_FIELD_MISSING_DEFAULT_VALUE", "validity_period")
	if r.Version != 1 || r.Direction != ReadsOld || r.Location != "/fields/1" || !strings.Contains(r.Message, "missing from version 1") {
		t.Fatalf("reason: %+v", r)
	}
	fwd := verdict.At(Forward)
	if fwd.Compatible || findReason(fwd.Reasons, "READER_FIELD_MISSING_DEFAULT_VALUE", "start_date") == nil ||
		findReason(fwd.Reasons, "READER_FIELD_MISSING_DEFAULT_VALUE", "end_date") == nil {
		t.Fatalf("FORWARD: %+v", fwd)
	}
	if verdict.Compatible || len(verdict.Reasons) != 3 {
		t.Fatalf("FULL should carry both directions' reasons: %+v", verdict.Reasons)
	}

	changes, err := Diff(Avro, Schema{Text: v1}, next)
	if err != nil {
		t.Fatal(err)
	}
	if findChange(changes, Removed, "start_date") == nil || findChange(changes, Removed, "end_date") == nil ||
		findChange(changes, Added, "validity_period") == nil {
		t.Fatalf("diff: %v", changes)
	}
	for _, c := range changes {
		if c.Path == "validity_period.from" || c.Path == "validity_period.to" {
			t.Fatalf("fields of an added record are reported with it, not one by one: %v", changes)
		}
	}
}

func TestWidgetRenames(t *testing.T) {
	w := fixture(t, "confluent-sr__widget.avsc")
	nw := fixture(t, "confluent-sr__newwidget.avsc")
	nnw := fixture(t, "confluent-sr__newerwidget.avsc")

	v := mustCheck(t, Avro, nw, Numbered(w), Backward)
	if v.Compatible || findReason(v.Reasons, "NAME_MISMATCH", "") == nil {
		t.Fatalf("record name changed without alias: %+v", v.Reasons)
	}
	changes, err := Diff(Avro, Schema{Text: w}, Schema{Text: nw})
	if err != nil {
		t.Fatal(err)
	}
	if c := findChange(changes, TypeNameChanged, ""); c == nil || !strings.HasSuffix(c.New, "NewSpecificWidget") {
		t.Fatalf("type name change: %v", changes)
	}
	rm := findChange(changes, Removed, "size")
	if rm == nil || !strings.Contains(rm.Hint, "height") {
		t.Fatalf("size -> height should be hinted as a likely rename: %v", changes)
	}
	if a := findChange(changes, Added, "height"); a == nil || !strings.Contains(a.Hint, "size") {
		t.Fatalf("added height: %v", changes)
	}

	changes, err = Diff(Avro, Schema{Text: nw}, Schema{Text: nnw})
	if err != nil {
		t.Fatal(err)
	}
	if rm := findChange(changes, Removed, "height"); rm == nil || !strings.Contains(rm.Hint, "length") {
		t.Fatalf("height -> length: %v", changes)
	}

	// The same rename declared with aliases is a real rename, readable
	// by the new schema.
	aliased := strings.Replace(strings.Replace(nw, `"name": "height",`, `"name": "height", "aliases": ["size"],`, 1),
		`"name": "NewSpecificWidget",`, `"name": "NewSpecificWidget", "aliases": ["io.confluent.kafka.schemaregistry.rules.SpecificWidget"],`, 1)
	v = mustCheck(t, Avro, aliased, Numbered(w), Backward)
	if !v.Compatible {
		t.Fatalf("aliased rename should be BACKWARD compatible: %s", v.Summary())
	}
	if f := v.At(Forward); f.Compatible || findReason(f.Reasons, "NAME_MISMATCH", "") == nil {
		t.Fatalf("the old reader knows neither alias, FORWARD must fail: %+v", f)
	}
	changes, err = Diff(Avro, Schema{Text: w}, Schema{Text: aliased})
	if err != nil {
		t.Fatal(err)
	}
	if c := findChange(changes, Renamed, "height"); c == nil || c.OldPath != "size" {
		t.Fatalf("alias rename: %v", changes)
	}
	if findChange(changes, Removed, "size") != nil {
		t.Fatalf("an aliased field is renamed, not removed: %v", changes)
	}
}

func TestTransitiveCatchesOlderVersion(t *testing.T) {
	v1 := `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"x","type":"int"}]}`
	v2 := `{"type":"record","name":"R","fields":[{"name":"id","type":"string"}]}`
	v3 := `{"type":"record","name":"R","fields":[{"name":"id","type":"string"},{"name":"x","type":"string","default":""}]}`
	v := mustCheck(t, Avro, v3, Numbered(v1, v2), BackwardTransitive)
	if !v.At(Backward).Compatible {
		t.Fatalf("v3 reads v2 data (x takes its default): %+v", v.At(Backward))
	}
	if v.Compatible {
		t.Fatal("v3 cannot read v1's int x as string")
	}
	r := findReason(v.Reasons, "TYPE_MISMATCH", "x")
	if r == nil || r.Version != 1 || !strings.Contains(r.Message, "int") || !strings.Contains(r.Message, "string") {
		t.Fatalf("reasons: %+v", v.Reasons)
	}
	if got := v.At(BackwardTransitive).Checked; len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Fatalf("transitive checks newest first: %v", got)
	}
	if !v.At(None).Compatible {
		t.Fatal("NONE is always compatible")
	}
}

func TestNestedOptionalRecordReasonNamesInnerField(t *testing.T) {
	old := `{"type":"record","name":"R","fields":[{"name":"addr","type":["null",{"type":"record","name":"A","fields":[{"name":"city","type":"string"}]}],"default":null}]}`
	nu := `{"type":"record","name":"R","fields":[{"name":"addr","type":["null",{"type":"record","name":"A","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string"}]}],"default":null}]}`
	v := mustCheck(t, Avro, nu, Numbered(old), Backward)
	if v.Compatible || findReason(v.Reasons, "READER_FIELD_MISSING_DEFAULT_VALUE", "addr.zip") == nil {
		t.Fatalf("reasons: %+v", v.Reasons)
	}
	changes, err := Diff(Avro, Schema{Text: old}, Schema{Text: nu})
	if err != nil {
		t.Fatal(err)
	}
	if findChange(changes, Added, "addr.zip") == nil {
		t.Fatalf("diff: %v", changes)
	}
}

func TestAvroDiffKinds(t *testing.T) {
	old := `{"type":"record","name":"R","fields":[
		{"name":"a","type":"int"},
		{"name":"b","type":"string","default":"x"},
		{"name":"c","type":"string","default":"y"},
		{"name":"d","type":{"type":"array","items":{"type":"record","name":"I","fields":[{"name":"q","type":"int"}]}}}]}`
	nu := `{"type":"record","name":"R","fields":[
		{"name":"a","type":"long"},
		{"name":"b","type":"string","default":"z"},
		{"name":"c","type":"string"},
		{"name":"d","type":{"type":"array","items":{"type":"record","name":"I","fields":[{"name":"q","type":"int"},{"name":"r","type":"int","default":0}]}}}]}`
	changes, err := Diff(Avro, Schema{Text: old}, Schema{Text: nu})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		k    ChangeKind
		path string
	}{{TypeChanged, "a"}, {DefaultChanged, "b"}, {OptionalToRequired, "c"}, {Added, "d[].r"}}
	for _, w := range want {
		if findChange(changes, w.k, w.path) == nil {
			t.Errorf("missing %s %s in %v", w.k, w.path, changes)
		}
	}
	if len(changes) != len(want) {
		t.Errorf("extra changes: %v", changes)
	}
	if c := findChange(changes, DefaultChanged, "b"); c.Old != `"x"` || c.New != `"z"` {
		t.Errorf("default change: %+v", c)
	}
	// int -> long is a promotion Avro allows.
	v := mustCheck(t, Avro, nu, Numbered(old), Backward)
	if findReason(v.Reasons, "TYPE_MISMATCH", "a") != nil {
		t.Errorf("int -> long is readable: %+v", v.Reasons)
	}
}

func TestAvroParseErrorsHaveLineAndColumn(t *testing.T) {
	bad := "{\"type\":\"record\",\n \"name\":\"R\",\n \"fields\":[{\"name\":\"a\" \"type\":\"int\"}]}"
	_, err := Check(Avro, Schema{Text: bad}, nil, Backward)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 || pe.Column != 24 || pe.Which != "new schema" {
		t.Fatalf("got %#v (%v)", pe, err)
	}
	if !strings.Contains(err.Error(), "line 3, column 24") {
		t.Fatalf("message: %v", err)
	}
	_, err = Check(Avro, Schema{Text: usageV12}, []Version{{Version: 4, Schema: Schema{Text: `{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}`}}}, Backward)
	if !errors.As(err, &pe) || pe.Which != "version 4" || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("bad earlier version: %v", err)
	}
	if _, err := Check(Avro, Schema{Text: "  "}, nil, Backward); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty schema: %v", err)
	}
}

func TestLevelAndKindParsing(t *testing.T) {
	if l, err := ParseLevel("backward_transitive"); err != nil || l != BackwardTransitive {
		t.Fatalf("%v %v", l, err)
	}
	if _, err := ParseLevel("BACKWARDS"); err == nil || !strings.Contains(err.Error(), "closest: BACKWARD") {
		t.Fatalf("typo: %v", err)
	}
	if k, err := ParseKind(""); err != nil || k != Avro {
		t.Fatalf("empty kind is AVRO: %v %v", k, err)
	}
	if _, err := ParseKind("xml"); err == nil || !strings.Contains(err.Error(), "AVRO, JSON, PROTOBUF") {
		t.Fatalf("bad kind: %v", err)
	}
	if v, err := Check("avro", Schema{Text: usageV11}, nil, ""); err != nil || v.Kind != Avro || v.Level != Backward {
		t.Fatalf("lower-case kind and default level: %+v %v", v, err)
	}
	if _, err := Check("XML", Schema{Text: usageV11}, nil, ""); err == nil {
		t.Fatal("unknown kind accepted")
	}
	if _, err := Check(Avro, Schema{Text: usageV11}, nil, "SIDEWAYS"); err == nil {
		t.Fatal("bad level accepted")
	}
	if v := mustCheck(t, Avro, usageV12, Numbered(usageV11), "backward"); !v.Compatible || v.Level != Backward {
		t.Fatalf("lower-case level: %+v", v)
	}
	v := mustCheck(t, Avro, usageV11, nil, FullTransitive)
	if !v.Compatible || v.Latest != 0 || !strings.Contains(v.Summary(), "first version") || len(v.Levels) != len(Levels) {
		t.Fatalf("first version: %+v", v)
	}
}

func TestAvroCanonicalHash(t *testing.T) {
	spaced := strings.ReplaceAll(usageV11, ",", ",\n   ")
	a, err := Canonicalize(Avro, Schema{Text: usageV11})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonicalize(Avro, Schema{Text: spaced})
	if err != nil {
		t.Fatal(err)
	}
	if a.SHA256 != b.SHA256 || a.Form != b.Form {
		t.Fatal("layout changed the canonical hash")
	}
	fp := avro.MustParse(usageV11).Fingerprint()
	if a.SHA256 != hex.EncodeToString(fp[:]) {
		t.Fatalf("hash %s differs from hamba's fingerprint", a.SHA256)
	}
	c, err := Canonicalize(Avro, Schema{Text: usageV13})
	if err != nil {
		t.Fatal(err)
	}
	if c.SHA256 == a.SHA256 {
		t.Fatal("different schemas share a hash")
	}
	// A reference is part of what is approved: its content is inlined.
	v2 := fixture(t, "demo-scene__membership_v2.avsc")
	vp := fixture(t, "demo-scene__validity_period.avsc")
	m, err := Canonicalize(Avro, Schema{Text: v2, References: []string{vp}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Form, `"name":"from"`) {
		t.Fatalf("reference not inlined: %s", m.Form)
	}
}
