package compare

import (
	"context"
	"maps"
	"os"
	"sync"
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

// flexFlowVerdicts are FlexFlow's 640 rules related to handMadeParallel,
// once for the tests that read them.
var flexFlowVerdicts = func() func(t *testing.T) ([]Verdict, error) {
	var once sync.Once
	var vs []Verdict
	var err error
	return func(t *testing.T) ([]Verdict, error) {
		path := testfiles.Shared(t, "anchors", "flexflow-graph_subst_3_v2.json")
		ours := handMadeParallel(t)
		once.Do(func() {
			var data []byte
			if data, err = os.ReadFile(path); err != nil {
				return
			}
			var f *exchange.Foreign
			if f, err = exchange.ReadFlexFlow("flexflow-graph_subst_3_v2.json", data, rules.All()); err != nil {
				return
			}
			theirs := make([]Foreign, len(f.Rules))
			for i, n := range f.Rules {
				theirs[i] = Foreign{Name: n.Name, Rule: n.Rule}
			}
			start := time.Now()
			vs, err = Compare(context.Background(), ours, theirs, DefaultLimits, nil)
			t.Logf("compared in %v", time.Since(start))
		})
		return vs, err
	}
}()

// TestFlexFlowVerdicts relates all 640 rules of FlexFlow's file to a
// hand-made parallel rule set: each rule gets exactly one verdict, the
// counts are stable (contained, implied and missed depend on the rule set;
// refuted, true at degree 2 only, trivial and never applying do not),
// every refuted and degree-2-only rule has a counterexample, and the 112
// rules whose target reads inputs the source never binds are listed with
// whether they are sound.
func TestFlexFlowVerdicts(t *testing.T) {
	// The package's long tests run side by side: each one's stages that
	// run on one goroutine leave the other cores to the rest.
	t.Parallel()
	vs, err := flexFlowVerdicts(t)
	if err != nil {
		t.Fatal(err)
	}
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
	// 32 of the missed never apply: their source type-checks under none of
	// the layouts tried. Judged in our model (reduce adds partial sums
	// only), none is true at degree 2 only; FlexFlow's own reading is
	// judged apart (TestFlexFlowReading, build.TestFlexFlowAgainstParallelRelease).
	want := map[Relation]int{Contained: 5, Implied: 13, Missed: 333, Trivial: 32, Falsified: 257}
	if !maps.Equal(got, want) {
		t.Errorf("verdicts %v, want %v", got, want)
	}
	if never != 32 {
		t.Errorf("%d rules never apply, want 32", never)
	}
	if free != 112 || sound != 0 {
		t.Errorf("%d rules read free inputs (%d sound), want 112 (0 sound)", free, sound)
	}
}
