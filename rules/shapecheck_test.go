package rules_test

import (
	"testing"

	"rulebook/rules"
)

// TestParallelShapesChecked: recorded shapes under which a parallel rule
// does not type-check (a degree that does not divide a size) are refused
// in one line; a rule with d is checked at the base degree.
func TestParallelShapesChecked(t *testing.T) {
	reg := rules.All()
	cases := []struct{ rule, inputs, err string }{
		{"(combine 0 2 (partition 0 2 ?a)) => (relu ?a)", "?a:4x4", ""},
		{"(combine 0 2 (partition 0 2 ?a)) => (relu ?a)", "?a:5x4", "shapes: source: node 0: partition: degree 2 does not divide dimension 0 of 5x4 into equal pieces"},
		{"(combine 0 d (partition 0 d ?a)) => (relu ?a)", "?a:6x4", ""},
		{"(reduce d ?a) => (relu ?a)", "?a:6x4", "shapes: source: node 0: reduce: degree 2 does not divide the 1 partial sums of 6x4"},
		{"(relu (relu ?a)) => (relu ?a)", "?a:5x4", ""},
	}
	for _, c := range cases {
		text, err := rules.ParseText(reg, c.rule, c.inputs, "")
		if err != nil {
			t.Fatal(err)
		}
		err = text.Rule().CheckParallelShapes()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err {
			t.Errorf("%s | %s: %q, want %q", c.rule, c.inputs, got, c.err)
		}
	}
}
