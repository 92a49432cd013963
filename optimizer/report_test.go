package optimizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/version"
)

// The report's layout is what scripts read: the field names, their order
// and the stop reason's text stay as they are; new fields come after the
// ones they explain. Rules read as written ("=>", not "=\u003e").
func TestReportLayout(t *testing.T) {
	r := &Report{Model: "m.onnx", Rules: ReportRules{Version: "v1", Hash: "ab", Count: 2}, CostModel: "measured", CostUnit: "ms", Device: "cpu/2",
		Before: 2, After: 1, Speedup: 2, Applied: []AppliedRule{{Index: 1, Hash: "cd", Rule: "(relu (relu ?a)) => (relu ?a)", Count: 3, LeftToRight: 2, RightToLeft: 1}},
		Opaque: map[string]int{"MaxPool": 1}, OpaqueReasons: []OpaqueReason{{Operator: "MaxPool", Nodes: 1, Reason: "ceil_mode 1"}},
		OpaqueShare: OpaqueShare{Nodes: 4, Opaque: 1, UncoveredOperators: []string{}, Refused: 1, RefusedShare: 0.25},
		Search: SearchStats{Explored: 4, Seen: 5, Seconds: 0.5, Stopped: BudgetSpent,
			Trace: []TracePoint{{Best: 2}}}, ByOperator: []OperatorChange{{Operator: "Relu", NodesBefore: 2, Before: 2, NodesAfter: 1, After: 1}},
		MemoryBefore: 10, MemoryAfter: 9, Measured: &SideBySide{Runs: 3, Threads: 2, Original: 2.5, Optimized: 2, Speedup: 1.25, MaxRelDiff: 1e-7, Spread: 0.25},
		Confirmed:    &ConfirmedGain{Rounds: 3, Removed: 1, Added: 0.5, Held: true},
		ExternalData: []ExternalData{{Location: "m.weights", Initializers: 2, BesideOutput: false, BesideInput: true}}}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "model": "m.onnx",
  "rules": {
    "version": "v1",
    "hash": "ab",
    "count": 2
  },
  "cost_model": "measured",
  "cost_unit": "ms",
  "device": "cpu/2",
  "cost_before_ms": 2,
  "cost_after_ms": 1,
  "speedup": 2,
  "applied": [
    {
      "index": 1,
      "hash": "cd",
      "rule": "(relu (relu ?a)) => (relu ?a)",
      "count": 3,
      "left_to_right": 2,
      "right_to_left": 1
    }
  ],
  "opaque": {
    "MaxPool": 1
  },
  "opaque_reasons": [
    {
      "operator": "MaxPool",
      "nodes": 1,
      "reason": "ceil_mode 1"
    }
  ],
  "search": {
    "explored": 4,
    "seen": 5,
    "seconds": 0.5,
    "stopped": "budget",
    "over_memory_limit": 0,
    "best_cost_over_time": [
      {
        "seconds": 0,
        "explored": 0,
        "best_ms": 2
      }
    ]
  },
  "cost_by_operator": [
    {
      "operator": "Relu",
      "nodes_before": 2,
      "before_ms": 2,
      "nodes_after": 1,
      "after_ms": 1
    }
  ],
  "rules_without_shapes_left_out": 0,
  "memory_before_bytes": 10,
  "memory_after_bytes": 9,
  "measured": {
    "runs": 3,
    "threads": 2,
    "original_ms": 2.5,
    "optimized_ms": 2,
    "speedup": 1.25,
    "max_relative_difference": 1e-7,
    "spread_ms": 0.25
  },
  "confirmed": {
    "rounds": 3,
    "removed_ms": 1,
    "added_ms": 0.5,
    "held": true
  },
  "external_data": [
    {
      "location": "m.weights",
      "initializers": 2,
      "beside_output": false,
      "beside_input": true
    }
  ],
  "opaque_share": {
    "nodes": 4,
    "opaque": 1,
    "uncovered": 0,
    "uncovered_operators": [],
    "refused": 1,
    "refused_share": 0.25
  }
}
`
	if string(got) != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
	var back Report
	if err := json.Unmarshal(got, &back); err != nil || back.Search.Stopped != BudgetSpent {
		t.Errorf("read back: stopped %q (%v)", back.Search.Stopped, err)
	}
	if o := r.Optimization(7); o.RunID != 7 || o.Stopped != "budget" || len(o.Uses) != 1 || o.Uses[0].Count != 3 {
		t.Errorf("as recorded: %+v", o)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata from this run")

// reportGolden is the report of a real optimization of squeezenet, with
// the values that vary from run to run or machine to machine normalised.
const reportGolden = "testdata/optimize-report.golden.json"

// TestReportGolden optimizes squeezenet as 'rulebook optimize' does and
// compares the report with a golden file: every field, its order and,
// the times and the machine aside, its value. 'go test ./optimizer -run
// ReportGolden -update' rewrites the file when the layout changes on
// purpose (say so in docs/optimize-report.md too).
func TestReportGolden(t *testing.T) {
	path := testfiles.Shared(t, "models", "squeezenet1_1.onnx")
	rs, err := version.LoadBundle(bundle3Ops)
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultOptions()
	opt.Budget = 10
	dir := t.TempDir()
	runJob(t, path, rs, opt, dir)
	got, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	got = normaliseReport(got, path)
	if *update {
		if err := os.WriteFile(reportGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(reportGolden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the report differs from %s (-update rewrites it):\n%s", reportGolden, got)
	}
}

// normaliseReport replaces what varies between runs and machines: times,
// the device, the model's path and where the weights file lies; costs
// keep 9 digits, which sums in another order or fused multiply-adds do
// not change.
func normaliseReport(report []byte, model string) []byte {
	for _, r := range []struct{ pattern, with string }{
		{`("seconds": )[0-9.e+-]+`, "${1}0"},
		{`("device": )"[^"]*"`, `${1}"cpu/N"`},
		{`("beside_(?:input|output)": )(?:true|false)`, "${1}false"},
	} {
		report = regexp.MustCompile(r.pattern).ReplaceAll(report, []byte(r.with))
	}
	report = regexp.MustCompile(`(: )(-?[0-9]+\.[0-9]+(?:e[+-]?[0-9]+)?)`).ReplaceAllFunc(report, func(m []byte) []byte {
		v, err := strconv.ParseFloat(string(m[2:]), 64)
		if err != nil {
			return m
		}
		return []byte(": " + strconv.FormatFloat(v, 'g', 9, 64))
	})
	return bytes.Replace(report, []byte(strconv.Quote(model)), []byte(`"squeezenet1_1.onnx"`), 1)
}

// Every field of the report, nested ones too, is described in
// docs/optimize-report.md, in a table row of its own.
func TestReportFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/optimize-report.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range jsonFields(reflect.TypeFor[Report]()) {
		if !bytes.Contains(doc, []byte("| `"+name+"` |")) {
			t.Errorf("docs/optimize-report.md does not describe the report's field %q", name)
		}
	}
}

// jsonFields are the JSON names of a struct's fields and of the fields of
// the structs it holds.
func jsonFields(typ reflect.Type) []string {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
		out = append(out, jsonFields(f.Type)...)
	}
	return out
}
