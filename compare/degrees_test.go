package compare

import (
	"context"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestJudgeDegrees: a parallel rule is refuted at its own degree (false in
// value, in layout, or with its target ill laid out where its source is
// not), or true at every degree swept, each failure with the layout it
// fails at; a rule whose source type-checks nowhere never applies.
func TestJudgeDegrees(t *testing.T) {
	cases := []struct {
		rule string
		want Relation
		kind rules.Mismatch
		cx   string // a part of the counterexample
	}{
		{"(combine 1 2 (partition 1 2 ?a)) => ?a", "", 0, ""},
		{"(combine 0 d (partition 0 d ?a)) => ?a", "", 0, ""},
		{"(linear none (replicate 2 ?a) (partition 1 2 ?b)) => (partition 2 2 (linear none ?a ?b))", "", 0, ""},
		{"(linear none (partition 1 2 ?a) (replicate 2 ?b)) => (partition 1 2 (linear none ?a ?b))", "", 0, ""},
		// Unity's reduce(d, replicate(d, x)) = d·x is not ours: reduce adds
		// partial sums only.
		{"(ewadd ?a ?a) => (reduce 2 (replicate 2 ?a))", Falsified, rules.TargetIllLaidOut, "at d=2 ?a:2x2x2: the source type-checks and the target does not: node 1: reduce: degree 2 does not divide the 1 partial sums"},
		{"(reduce 2 (replicate 2 ?a)) => ?a", Falsified, rules.LayoutDiffers, "at d=2 ?a:2x2x2+sum2: output 0 is 2x2x2+copy2 on the source and 2x2x2+sum2 on the target"},
		// A rule with d claims every degree.
		{"(reduce d (replicate d ?a)) => ?a", Falsified, rules.LayoutDiffers, "at d=2"},
		// Written at degree 4: judged as written.
		{"(reduce 4 (replicate 4 ?a)) => ?a", Falsified, rules.LayoutDiffers, "at d=4 ?a:2x2x2+sum4"},
		{"(combine 1 4 (partition 1 4 ?a)) => (relu (relu ?a))", Falsified, rules.ValueDiffers, "at d=4 ?a:2x4x2: output 0 (2x4x2) element 0"},
		{"(combine 1 4 (partition 1 4 ?a)) => ?a", "", 0, ""},
		{"(partition 1 2 ?a) => (partition 2 2 ?a)", Falsified, rules.LayoutDiffers, "output 0 is 2x2/2x2 on the source and 2x2x2/2 on the target"},
		{"(reduce 2 (partition 1 2 ?a)) => (partition 1 2 (relu ?a))", Falsified, rules.TargetIllLaidOut, "relu: operand 0 holds 2 partial sums"},
		{"(reduce 2 (partition 1 2 ?a)) => (relu (reduce 2 (partition 1 2 ?a)))", Falsified, rules.ValueDiffers, "at d=2 ?a:2x2x2+sum2: output 0 (2x2/2x2) element 0"},
		{"(reduce 2 ?a) => (concat 0 ?a (partition 1 2 ?a))", Falsified, rules.TargetIllLaidOut, "concat: operands must have equal layouts"},
		{"(let ((%0 (partition 2 2 ?a))) (concat 1 %0 (reduce 2 %0))) => ?a", "", 0, "the source type-checks under none of the input layouts tried at degree 2"},
	}
	for _, c := range cases {
		r, err := rules.ParseRule(rules.All(), c.rule)
		if err != nil {
			t.Fatal(err)
		}
		j, err := JudgeDegrees(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if j.Relation != c.want || j.Kind != c.kind || !strings.Contains(j.Counterexample, c.cx) || (c.cx != "") != (j.Counterexample != "") || j.Vacuous != (c.want == "" && c.cx != "") {
			t.Errorf("%s: %q %s, %q; want %q %s with %q", c.rule, j.Relation, j.Kind, j.Counterexample, c.want, c.kind, c.cx)
		}
	}
}

// TestFreeInputSoundness: a target that reads an input its source never
// binds is sound only if its value does not depend on it.
func TestFreeInputSoundness(t *testing.T) {
	cases := []struct {
		rule, inputs string
		free         []int
		sound        bool
		why          string
	}{
		{"(relu ?a) => (split0 0 (concat 0 (relu ?a) ?b))", "?a:4x4 ?b:4x4", []int{1}, true, "sound: reads ?b, yet gives the same pieces"},
		{"(ewadd ?a ?a) => (ewadd ?a ?b)", "?a:4x4 ?b:4x4", []int{1}, false, "not sound: output 0 depends on ?b"},
		{"(reduce 2 ?a) => (reduce 2 (ewadd ?a (ewadd ?b (ewadd ?a ?a))))", "", []int{1}, false, "not sound: output 0 depends on ?b"},
		{"(reduce 2 ?a) => (concat 0 ?a ?b)", "", []int{1}, false, "not sound: reads ?b, and no input layouts"},
		{"(combine 0 2 ?a) => (combine 0 2 (split0 1 (concat 1 ?a ?b)))", "", []int{1}, true, "sound: reads ?b"},
	}
	for _, c := range cases {
		r, err := rules.ParseRule(rules.All(), c.rule)
		if err != nil {
			t.Fatal(err)
		}
		if c.inputs != "" {
			if err := r.SetShapes(c.inputs, ""); err != nil {
				t.Fatal(err)
			}
		}
		free := FreeInputs(r)
		if len(free) != len(c.free) || free[0] != c.free[0] {
			t.Errorf("%s: free inputs %v, want %v", c.rule, free, c.free)
			continue
		}
		sound, why := FreeInputSoundness(r, free)
		if sound != c.sound || !strings.Contains(why, c.why) {
			t.Errorf("%s: %v %q, want %v with %q", c.rule, sound, why, c.sound, c.why)
		}
	}
}
