package compare

import (
	"context"
	"strings"
	"testing"

	"rulebook/exchange"
	"rulebook/internal/testfiles"
	"rulebook/rules"
)

// TestFlexFlowReading judges the rules of FlexFlow's file that
// docs/parallel.md names under FlexFlow's own reading of replicate and
// reduce (rules.FlexFlowReading) and under ours: rules 299 and 300 are
// true at degree 2 only, with counterexamples at degree 3, and rule 239, a
// linear commuting with the sum of two halves of a row dimension, is true
// in FlexFlow's reading and not in ours. The counts over all 640 rules are
// checked where the release is built (build.TestFlexFlowAgainstParallelRelease).
func TestFlexFlowReading(t *testing.T) {
	path := testfiles.Shared(t, "anchors", "flexflow-graph_subst_3_v2.json")
	ctx := context.Background()
	theirs, _, err := exchange.ReadFileContext(ctx, path, "flexflow-json", rules.FlexFlowReading())
	if err != nil {
		t.Fatal(err)
	}
	ours, _, err := exchange.ReadFileContext(ctx, path, "flexflow-json", rules.All())
	if err != nil {
		t.Fatal(err)
	}
	byName := func(f *exchange.Foreign, name string) *rules.Rule {
		for _, n := range f.Rules {
			if n.Name == name {
				return n.Rule
			}
		}
		t.Fatalf("%s is not in %s", name, path)
		return nil
	}
	for _, name := range []string{"taso_rule_299", "taso_rule_300"} {
		got, cx, err := JudgeReading(ctx, byName(theirs, name))
		if err != nil {
			t.Fatal(err)
		}
		if got != ReadingDegree2 || !strings.Contains(cx, "at d=3") {
			t.Errorf("%s: %s %q, want true at degree 2 only with a counterexample at d=3", name, got, cx)
		}
	}
	got, cx, err := JudgeReading(ctx, byName(theirs, "taso_rule_239"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := JudgeDegrees(ctx, byName(ours, "taso_rule_239"))
	if err != nil {
		t.Fatal(err)
	}
	if got != ReadingTrue || j.Relation != Falsified {
		t.Errorf("taso_rule_239: %s %q in FlexFlow's reading, %q %q in ours; want true, and refuted", got, cx, j.Relation, j.Counterexample)
	}
}
