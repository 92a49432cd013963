package rules_test

import (
	"context"
	"strings"
	"testing"

	"rulebook/fingerprint"
	"rulebook/rules"
)

func sweepConfig() rules.SweepConfig {
	in := fingerprint.Inputs{Seed: 1}
	cfg := rules.DefaultSweep()
	cfg.Int, cfg.Float = in.Int, in.Float
	return cfg
}

// TestSweepFindsEachMismatch: the sweep holds true rules at every combined
// layout and finds each kind of failure, with the layout it fails at.
func TestSweepFindsEachMismatch(t *testing.T) {
	cases := []struct {
		rule, inputs string
		want         rules.Mismatch // 0: true
		at           string         // a substring of the counterexample
	}{
		// Unity's row-parallel linear, at every degree and layout.
		{"(reduce d (linear none (partition 2 d ?a) (partition 0 d ?b))) => (linear none ?a ?b)", "?a:4x4x4 ?b:4x4", 0, ""},
		{"(combine 1 d (partition 1 d ?a)) => ?a", "?a:4x4x4", 0, ""},
		{"(ewadd (ewadd ?a ?b) (ewadd ?c ?d)) => (ewadd (ewadd ?a ?c) (ewadd ?b ?d))", "?a:4x4x4 ?b:4x4x4 ?c:4x4x4 ?d:4x4x4", 0, ""},
		// The product's partial sums are numbered operand sum first, so a
		// reduce of the product adds contraction blocks, not a's sums.
		{"(linear none (reduce d (partition 0 d ?a)) ?b) => (reduce d (partition 0 d (linear none ?a ?b)))", "?a:4x4x4 ?b:4x4", rules.ValueDiffers, "+sum2"},
		// Where a's rows are cut, the target's linear needs b replicated.
		{"(linear none (replicate d ?a) (replicate d ?b)) => (replicate d (linear none ?a ?b))", "?a:4x4x4 ?b:4x4", rules.TargetIllLaidOut, "pieces do not pair up"},
		// reduce adds partial sums and leaves the copies.
		{"(reduce d (replicate d ?a)) => ?a", "?a:4x4x4", rules.LayoutDiffers, "+copy2"},
		// A rule written at degree 2 is swept at degree 2 only.
		{"(combine 0 2 (partition 0 2 ?a)) => ?a", "?a:4x4", 0, ""},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			text, err := rules.ParseText(rules.All(), c.rule, c.inputs, "")
			if err != nil {
				t.Fatal(err)
			}
			res, err := text.Rule().Sweep(context.Background(), sweepConfig())
			if err != nil {
				t.Fatal(err)
			}
			switch cx := res.Counterexample; {
			case c.want == 0 && cx != nil:
				t.Fatalf("refuted: %s", cx)
			case c.want == 0 && res.Evaluated == 0:
				t.Fatal("nothing evaluated")
			case c.want != 0 && cx == nil:
				t.Fatalf("not refuted after %d assignments", res.Evaluated)
			case c.want != 0 && (cx.Kind != c.want || !strings.Contains(cx.String(), c.at)):
				t.Fatalf("got %s (%s), want %s at %q", cx, cx.Kind, c.want, c.at)
			}
		})
	}
}

// TestSweepCounterexampleHolds re-evaluates a counterexample the sweep
// reports, outside the sweep: the sides really differ there.
func TestSweepCounterexampleHolds(t *testing.T) {
	text, err := rules.ParseText(rules.All(), "(linear none (reduce d (partition 1 d ?a)) ?b) => (reduce d (partition 1 d (linear none ?a ?b)))", "?a:4x4x4 ?b:4x4", "")
	if err != nil {
		t.Fatal(err)
	}
	r := text.Rule()
	res, err := r.Sweep(context.Background(), sweepConfig())
	if err != nil || res.Counterexample == nil {
		t.Fatalf("not refuted: %v", err)
	}
	cx := res.Counterexample
	at := r.WithDegree(cx.Degree)
	in := fingerprint.Inputs{Seed: 7}
	xs := make([]*rules.IntTensor, len(cx.Inputs))
	for i, s := range cx.Inputs {
		xs[i] = in.Int(i, s)
	}
	a, errA := rules.Evaluate(&at.Src, rules.IntKernelOf, xs)
	b, errB := rules.Evaluate(&at.Dst, rules.IntKernelOf, xs)
	if errA != nil || errB != nil {
		t.Fatalf("%s: %v %v", cx, errA, errB)
	}
	same := a[0].Shape.SameDims(b[0].Shape)
	for k := range a[0].Data {
		same = same && a[0].Data[k] == b[0].Data[k]
	}
	if same {
		t.Fatalf("%s: the sides agree on other draws", cx)
	}
}
