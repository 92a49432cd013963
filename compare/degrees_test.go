package compare

import (
	"strings"
	"testing"

	"rulebook/rules"
)

// TestJudgeDegrees: a parallel rule is refuted at its own degree, true at
// degree 2 only, or true at every degree tested, each with a
// counterexample where it fails.
func TestJudgeDegrees(t *testing.T) {
	cases := []struct {
		rule string
		want Relation
		cx   string // a part of the counterexample
	}{
		{"(combine 1 2 (partition 1 2 ?a)) => ?a", "", ""},
		{"(linear none (replicate 2 ?a) (partition 1 2 ?b)) => (partition 2 2 (linear none ?a ?b))", "", ""},
		{"(linear none (partition 1 2 ?a) (replicate 2 ?b)) => (partition 1 2 (linear none ?a ?b))", "", ""},
		// Issue 14's example: reduce(d, replicate(d, x)) = d·x.
		{"(ewadd ?a ?a) => (reduce 2 (replicate 2 ?a))", DegreeTwoOnly, "degree 3, draw 0, output 0: element 0 of 12x12x12"},
		{"(reduce 2 (replicate 2 ?a)) => ?a", Falsified, "degree 2, draw 0, output 0"},
		// Written at degree 4: judged as written.
		{"(reduce 4 (replicate 4 ?a)) => ?a", Falsified, "at the rule's own degrees: draw 0, output 0"},
		{"(combine 1 4 (partition 1 4 ?a)) => (relu (relu ?a))", Falsified, "at the rule's own degrees: draw 0, output 0"},
		{"(combine 1 4 (partition 1 4 ?a)) => ?a", "", ""},
		{"(partition 1 2 ?a) => (partition 2 2 ?a)", Falsified, "output 0: source gives 4x4/2x4, target 4x4x4/2"},
		{"(reduce 2 (partition 1 2 ?a)) => (partition 1 2 (relu ?a))", Falsified, "output 0: source gives 4x4/2x4, target 4x4/2x4+copy2; inputs ?a:4x4x4+copy2"},
		{"(reduce 2 (partition 1 2 ?a)) => (relu (reduce 2 (partition 1 2 ?a)))", Falsified, "degree 2, draw 0"},
		{"(reduce 2 ?a) => (concat 0 ?a (partition 1 2 ?a))", Falsified, "the target does not type-check where the source does: node 1: concat: operands must have equal layouts"},
		{"(let ((%0 (partition 2 2 ?a))) (concat 1 %0 (reduce 2 %0))) => ?a", "", "the source type-checks under none of the input layouts tried at degree 2"},
	}
	for _, c := range cases {
		r, err := rules.ParseRule(rules.All(), c.rule)
		if err != nil {
			t.Fatal(err)
		}
		j := JudgeDegrees(r)
		if j.Relation != c.want || !strings.Contains(j.Counterexample, c.cx) || (c.cx != "") != (j.Counterexample != "") || j.Vacuous != (c.want == "" && c.cx != "") {
			t.Errorf("%s: %q, %q; want %q with %q", c.rule, j.Relation, j.Counterexample, c.want, c.cx)
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
		{"(reduce 2 ?a) => (reduce 2 (ewadd ?a (ewmul ?b (ewadd ?a ?a))))", "", []int{1}, false, "not sound: output 0 depends on ?b"},
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
