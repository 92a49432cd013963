package compare

import (
	"context"
	"maps"
	"os"
	"testing"
	"time"

	"rulebook/exchange"
	"rulebook/internal/testfiles"
	"rulebook/rules"
)

// handMadeParallel is a small parallel rule set with the degree variable,
// standing in for a parallel release: partition and combine undo each
// other and commute on other dimensions, and relu and linear commute with
// partition.
func handMadeParallel(t *testing.T) []*rules.Rule {
	t.Helper()
	var out []*rules.Rule
	for _, text := range []string{
		"(combine 0 d (partition 0 d ?a)) => ?a",
		"(combine 1 d (partition 1 d ?a)) => ?a",
		"(combine 2 d (partition 2 d ?a)) => ?a",
		"(partition 1 d (partition 2 d ?a)) => (partition 2 d (partition 1 d ?a))",
		"(relu (partition 1 d ?a)) => (partition 1 d (relu ?a))",
		"(relu (partition 2 d ?a)) => (partition 2 d (relu ?a))",
		"(linear none (replicate d ?a) (partition 1 d ?b)) => (partition 2 d (linear none ?a ?b))",
		"(linear none (partition 1 d ?a) (replicate d ?b)) => (partition 1 d (linear none ?a ?b))",
	} {
		r, err := rules.ParseRule(rules.All(), text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		out = append(out, r)
	}
	return out
}

// TestFlexFlowVerdicts relates all 640 rules of FlexFlow's file to a
// hand-made parallel rule set: each rule gets exactly one verdict, the
// counts are stable (contained, implied and missed depend on the rule set;
// refuted, true at degree 2 only, trivial and never applying do not), every refuted and degree-2-only rule has a
// counterexample, and the 112 rules whose target reads inputs the source
// never binds are listed with whether they are sound.
func TestFlexFlowVerdicts(t *testing.T) {
	data, err := os.ReadFile(testfiles.Shared(t, "anchors", "flexflow-graph_subst_3_v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := exchange.ReadFlexFlow("flexflow-graph_subst_3_v2.json", data, rules.All())
	if err != nil {
		t.Fatal(err)
	}
	theirs := make([]Foreign, len(f.Rules))
	for i, n := range f.Rules {
		theirs[i] = Foreign{Name: n.Name, Rule: n.Rule}
	}
	start := time.Now()
	vs, err := Compare(context.Background(), handMadeParallel(t), theirs, DefaultLimits, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compared in %v", time.Since(start))
	if len(vs) != 640 {
		t.Fatalf("%d verdicts, want 640", len(vs))
	}
	got := map[Relation]int{}
	free, sound, never := 0, 0, 0
	for _, v := range vs {
		got[v.Relation]++
		if v.Why.Cause == NeverApplies {
			never++
		}
		if (v.Relation == Falsified || v.Relation == DegreeTwoOnly) != (v.Counterexample != "") {
			t.Errorf("%s: %s with counterexample %q", v.Name, v.Relation, v.Counterexample)
		}
		if len(v.Free) > 0 {
			free++
			if v.FreeSound {
				sound++
			}
			if v.FreeWhy == "" {
				t.Errorf("%s reads free inputs %v, without a word on soundness", v.Name, v.Free)
			}
		}
	}
	// 68 of the missed never apply: their source type-checks under none of
	// the layouts tried.
	want := map[Relation]int{Contained: 5, Implied: 13, Missed: 416, Trivial: 32, Falsified: 172, DegreeTwoOnly: 2}
	if !maps.Equal(got, want) {
		t.Errorf("verdicts %v, want %v", got, want)
	}
	if never != 68 {
		t.Errorf("%d rules never apply, want 68", never)
	}
	if free != 112 || sound != 0 {
		t.Errorf("%d rules read free inputs (%d sound), want 112 (0 sound)", free, sound)
	}
}
