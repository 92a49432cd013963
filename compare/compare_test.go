package compare

import (
	"context"
	"strings"
	"testing"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/verify"
)

func TestCompare(t *testing.T) {
	parse := func(text string) *rules.Rule {
		r, err := rules.ParseRule(rules.Default(), text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return r
	}
	ours := []*rules.Rule{
		parse("(ewadd ?a ?b) => (ewadd ?b ?a)"),
		parse("(ewadd (ewadd ?a ?b) ?c) => (ewadd ?a (ewadd ?b ?c))"),
		parse("(transpose (transpose ?a)) => ?a"),
	}
	cases := []struct {
		rule  string
		want  Relation
		steps int
	}{
		{"(ewadd ?x ?y) => (ewadd ?y ?x)", Contained, 0},
		{"(ewadd ?a (ewadd ?b ?c)) => (ewadd (ewadd ?a ?b) ?c)", Contained, 0}, // the mirror image
		{"(ewadd (ewadd ?a ?b) ?c) => (ewadd (ewadd ?c ?b) ?a)", Implied, 0},
		{"(transpose (transpose (ewadd ?a ?b))) => (ewadd ?b ?a)", Implied, 2},
		{"(ewmul ?a ?b) => (ewmul ?b ?a)", Missed, 0},
		{"(relu ?a) => (relu ?a)", Trivial, 0},
	}
	var theirs []Foreign
	for _, c := range cases {
		theirs = append(theirs, Foreign{Name: c.rule, Rule: parse(c.rule)})
	}
	vs, err := Compare(context.Background(), ours, theirs, DefaultLimits, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		v := vs[i]
		if v.Relation != c.want {
			t.Errorf("%s: %s, want %s", c.rule, v.Relation, c.want)
		}
		if c.steps > 0 && len(v.Steps) != c.steps {
			t.Errorf("%s: implied in %d steps, want %d", c.rule, len(v.Steps), c.steps)
		}
		if v.Relation == Implied && len(v.Steps) == 0 {
			t.Errorf("%s: implied without steps", c.rule)
		}
	}
}

func TestExplain(t *testing.T) {
	parse := func(text string) *rules.Rule {
		r, err := rules.ParseRule(rules.Default(), text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return r
	}
	ours := []*rules.Rule{parse("(ewadd (ewadd ?a ?b) ?c) => (ewadd ?a (ewadd ?b ?c))")}
	grouped := "(concat 1 (conv2d 1 same none 1 ?a ?b) (conv2d 1 same none 1 ?c ?d)) => (conv2d 1 same none 2 (concat 1 ?a ?c) (concat 0 ?b ?d))"
	cases := []struct {
		rule    string
		refuted bool
		want    Cause
		detail  string // a part of the detail
	}{
		{"(ewmul ?a ?b) => (ewmul ?b ?a)", false, Unexplained, ""},
		{"(ewmul ?a ?b) => (ewmul ?a ?a)", true, Refuted, ""},
		{grouped, false, ShapeCondition, "same number of output channels"},
		{grouped, true, Refuted, "same number of output channels"},
		{"(concat 1 (conv2d 1 same none dw ?a ?b) (conv2d 1 same none dw ?c ?d)) => (conv2d 1 same none dw (concat 1 ?a ?c) (concat 0 ?b ?d))", false, ShapeCondition, "per input channel"},
		{"(let ((%0 (I_conv 3))) (conv2d 1 same none 1 %0 (conv2d 1 same none 1 %0 ?a))) => (enlarge 3 ?a)", false, KernelAsActivation, "I_conv as conv2d's input"},
		{"(conv2d 1 same none 1 ?a (pool_avg 3 1 same (I_conv 3))) => (pool_avg 3 1 same ?a)", false, KernelAsActivation, "I_conv as pool_avg's input"},
		{"(conv2d 1 same none dw ?a (ewadd ?b (C_pool 3))) => (ewadd (conv2d 1 same none dw ?a ?b) (pool_avg 3 1 same ?a))", false, ConstantElsewhere, "C_pool into ewadd"},
		{"(ewmul ?a (smul (C_pool 3) ?b)) => (smul ?a ?b)", true, Refuted, "also a constant feeds an operator other than its own: C_pool into smul"},
		{"(concat 2 (relu ?a) (relu ?b)) => (relu (concat 2 ?a ?b))", false, ParamNotGenerated, "concat axis 2"},
		{"(relu (relu (relu (relu ?a)))) => (relu ?a)", false, TooLarge, "4 operators"},
	}
	vs := make([]Verdict, len(cases))
	refuted := make([]bool, len(cases))
	for i, c := range cases {
		vs[i] = Verdict{Foreign: Foreign{Name: c.rule, Rule: parse(c.rule)}, Relation: Missed}
		refuted[i] = c.refuted
	}
	vs = append(vs, Verdict{Foreign: Foreign{Rule: parse("(ewadd ?a ?b) => (ewadd ?b ?a)")}, Relation: Contained})
	Explain(vs, append(refuted, false), ours)
	for i, c := range cases {
		why := vs[i].Why
		if why.Cause != c.want || !strings.Contains(why.Detail, c.detail) {
			t.Errorf("%s (refuted %v): %q, want %s with %q", c.rule, c.refuted, why, c.want, c.detail)
		}
	}
	tally := Count(vs)
	if tally.Reached() != 1 || tally.Missed(False) != 5 || tally.Missed(OutsideRoles) != 3 || tally.Missed(Gap) != 3 {
		t.Errorf("tally %+v: reached %d, false %d, outside roles %d, gaps %d; want 1, 5, 3, 3",
			tally, tally.Reached(), tally.Missed(False), tally.Missed(OutsideRoles), tally.Missed(Gap))
	}
}

// TestShapesFit: a graph on the way from a rule's source to its target
// must type-check at the rule's shapes and keep its outputs' shapes; a
// constant's shape is left open.
func TestShapesFit(t *testing.T) {
	reg := rules.Default()
	r, err := rules.ParseRule(reg, "(smul (transpose ?a) ?b) => (transpose (smul ?a ?b))")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetShapes("?a:2x4 ?b:scalar", ""); err != nil {
		t.Fatal(err)
	}
	fit := shapesFit(r)
	cases := []struct {
		graph string
		want  bool
	}{
		{"(smul (transpose ?a) ?b)", true},
		{"(transpose (smul ?a ?b))", true},
		{"(smul ?b (transpose ?a))", false},                  // a tensor as smul's scalar
		{"(smul ?a ?b)", false},                              // 2x4 where the rule gives 4x2
		{"(transpose (ewmul (smul ?a ?b) (I_ewmul)))", true}, // the constant takes any shape
	}
	for _, c := range cases {
		g, err := rules.ParseGraph(reg, c.graph)
		if err != nil {
			t.Fatalf("%s: %v", c.graph, err)
		}
		g.NumInputs = 2
		if got := fit(g); got != c.want {
			t.Errorf("%s: fits %v, want %v", c.graph, got, c.want)
		}
	}
	unshaped, _ := rules.ParseRule(reg, "(smul ?a ?b) => (smul ?b ?a)")
	if shapesFit(unshaped) != nil {
		t.Error("a rule without shapes restricts the graphs on the way")
	}
}

// TestFalseRulesAreNeverContained holds compare to issue 24's finding:
// rules 255, 79, 257 and 390 of the parallel release before reduce took
// partial sums only were false, yet compare called them contained. Here a
// version that holds them as they were still cannot contain or imply them:
// the sweep refutes each first, at the layout it names, and our verifier
// refutes each too (rules.TestSweepCounterexampleHolds re-evaluates such a
// layout apart from the sweep). The layout for rule 255,
// ?a:4x4x4/2 ?b:4/2x4, is one where the source is not laid out validly
// now: reduce takes no copies.
func TestFalseRulesAreNeverContained(t *testing.T) {
	texts := map[string]string{
		"255": "(linear none (reduce d (replicate d ?a)) ?b) => (reduce d (replicate d (linear none ?a ?b)))",
		"79":  "(linear none (reduce d (partition 1 d ?a)) ?b) => (reduce d (partition 1 d (linear none ?a ?b)))",
		"257": "(linear none (reduce d (partition 0 d ?a)) ?b) => (reduce d (partition 0 d (linear none ?a ?b)))",
		"390": "(reduce d (linear none (replicate d ?a) ?b)) => (linear none ?a (reduce d ?b))",
	}
	var ours []*rules.Rule
	var theirs []Foreign
	for name, text := range texts {
		r, err := rules.ParseRule(rules.All(), text)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetShapes("?a:4x4x4 ?b:4x4", ""); err != nil { // for the verifier's counterexample search
			t.Fatal(err)
		}
		ours = append(ours, r)
		theirs = append(theirs, Foreign{Name: name, Rule: r})
	}
	vs, err := Compare(context.Background(), ours, theirs, DefaultLimits, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Relation != Falsified || v.Counterexample == "" {
			t.Errorf("rule %s: %s, want refuted with a counterexample", v.Name, v.Relation)
			continue
		}
		t.Logf("rule %s: %s", v.Name, v.Counterexample)
	}
	set, err := axioms.Builtin(rules.All())
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]verify.Job, len(theirs))
	for i, f := range theirs {
		jobs[i] = verify.Job{ID: int64(i), Rule: f.Rule}
	}
	cfg := verify.Config{Registry: rules.All(), Axioms: set, Seed: 1}
	err = verify.Run(context.Background(), cfg, jobs, func(j verify.Job, res verify.Result) error {
		if res.Status != verify.Refuted {
			t.Errorf("rule %s: our verifier says %s (%s)", theirs[j.ID].Name, res.Status, res.Reason)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
