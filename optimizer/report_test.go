package optimizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The report's layout is what scripts read: the field names, their order
// and the stop reason's text stay as they are.
func TestReportLayout(t *testing.T) {
	r := &Report{Model: "m.onnx", Rules: ReportRules{Version: "v1", Hash: "ab", Count: 2}, CostModel: "analytic", Device: "cpu/2",
		Before: 2, After: 1, Speedup: 2, Applied: []AppliedRule{{Index: 1, Hash: "cd", Rule: "(relu (relu ?a)) => (relu ?a)", Count: 3}},
		Opaque: map[string]int{"MaxPool": 1}, Search: SearchStats{Explored: 4, Seen: 5, Seconds: 0.5, Stopped: BudgetSpent,
			Trace: []TracePoint{{Best: 2}}}, ByOperator: []OperatorChange{{Operator: "Relu", NodesBefore: 2, Before: 2, NodesAfter: 1, After: 1}},
		MemoryBefore: 10, MemoryAfter: 9, Confirmed: &ConfirmedGain{Rounds: 3, Removed: 1, Added: 0.5, Held: true}}
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
  "cost_model": "analytic",
  "device": "cpu/2",
  "cost_before_ms": 2,
  "cost_after_ms": 1,
  "speedup": 2,
  "applied": [
    {
      "index": 1,
      "hash": "cd",
      "rule": "(relu (relu ?a)) =\u003e (relu ?a)",
      "count": 3
    }
  ],
  "opaque": {
    "MaxPool": 1
  },
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
  "confirmed": {
    "rounds": 3,
    "removed_ms": 1,
    "added_ms": 0.5,
    "held": true
  },
  "external_data": null
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
