package compare

import (
	"context"
	"maps"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
)

// TestFlexFlowReading judges FlexFlow's 640 rules under FlexFlow's own
// reading of replicate and reduce (rules.FlexFlowReading) beside ours
// (against the hand-made rule set): the counts per verdict, and the
// findings docs/parallel.md states. Under FlexFlow's reading no rule is
// false in value, rules 299 and 300 are true at degree 2 only, with
// counterexamples at degree 3, and rule 239, a linear commuting with the
// sum of two halves of a row dimension, is true, though not in ours.
func TestFlexFlowReading(t *testing.T) {
	path := testfiles.Shared(t, "anchors", "flexflow-graph_subst_3_v2.json")
	vs, err := flexFlowVerdicts(t)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rs, err := FlexFlowReading(ctx, path, vs)
	if err != nil {
		t.Fatal(err)
	}
	got, ours := map[Reading]int{}, map[Reading]int{}
	byName := map[string]ReadingResult{}
	for _, r := range rs {
		got[r.Theirs]++
		ours[r.Ours]++
		byName[r.Name] = r
		failed := r.Theirs == ReadingValue || r.Theirs == ReadingLayout || r.Theirs == ReadingTarget || r.Theirs == ReadingDegree2
		if failed && r.Counterexample == "" || r.Theirs == ReadingTrue && r.Counterexample != "" {
			t.Errorf("%s: %s with counterexample %q", r.Name, r.Theirs, r.Counterexample)
		}
	}
	want := map[Reading]int{ReadingTrue: 366, ReadingDegree2: 2, ReadingLayout: 27, ReadingTarget: 109, ReadingUnbound: 112, ReadingNever: 24}
	if !maps.Equal(got, want) {
		t.Errorf("FlexFlow's reading: %v, want %v", got, want)
	}
	wantOurs := map[Reading]int{ReadingTrue: 319, ReadingValue: 1, ReadingLayout: 37, ReadingTarget: 119, ReadingUnbound: 112, ReadingNever: 20, ReadingTrivial: 32}
	if !maps.Equal(ours, wantOurs) {
		t.Errorf("ours: %v, want %v", ours, wantOurs)
	}
	for _, name := range []string{"taso_rule_299", "taso_rule_300"} {
		if r := byName[name]; r.Theirs != ReadingDegree2 || !strings.Contains(r.Counterexample, "at d=3") {
			t.Errorf("%s: %s %q, want true at degree 2 only with a counterexample at d=3", name, r.Theirs, r.Counterexample)
		}
	}
	if r := byName["taso_rule_239"]; r.Theirs != ReadingTrue || r.Ours == ReadingTrue {
		t.Errorf("taso_rule_239: %s in FlexFlow's reading, %s in ours; want true, and not true", r.Theirs, r.Ours)
	}
}
