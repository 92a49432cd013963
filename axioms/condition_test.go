package axioms

import (
	"context"
	"strings"
	"testing"

	"rulebook/rules"
)

// TestShapeConditionedAxioms validates axioms guarded by a shape
// condition on concrete tensors: pooling after a 1×1 convolution holds
// where the kernel is 1×1 and not where it is 3×3, and max pooling does
// not commute with a 1×1 convolution at all (max is not linear). Z3's
// formula keeps the condition, as a predicate.
func TestShapeConditionedAxioms(t *testing.T) {
	const body = "(= (conv2d 1 padding.same activation.none 1 (POOL 3 1 padding.same x) w) (POOL 3 1 padding.same (conv2d 1 padding.same activation.none 1 x w)))"
	cases := []struct {
		name, pool, cond string
		holds            bool
	}{
		{"avg-1x1", "pool_avg", "(kernel w 1 1)", true},
		{"avg-3x3", "pool_avg", "(kernel w 3 3)", false},
		{"avg-anywhere", "pool_avg", "", false},
		{"max-1x1", "pool_max", "(kernel w 1 1)", false},
	}
	reg := rules.Default()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			formula := strings.ReplaceAll(body, "POOL", c.pool)
			if c.cond != "" {
				formula = "(=> " + c.cond + " " + formula + ")"
			}
			src := "; c\n(assert (! (forall ((x Tensor) (w Tensor)) " + formula + ") :named " + c.name + "))"
			axs, err := Parse(c.name+".smt2", src, reg)
			if err != nil {
				t.Fatal(err)
			}
			a := axs[0]
			if a.ShapeConditioned() != (c.cond != "") || a.Conditional() || !strings.Contains(a.SolverFormula(), c.cond) {
				t.Errorf("shape-conditioned %v, layout-conditional %v, solver formula %s", a.ShapeConditioned(), a.Conditional(), a.SolverFormula())
			}
			set := &Set{Dir: "test", Axioms: axs}
			reports, err := Validate(context.Background(), set, reg, Bound{Dims: []int{1, 2, 3}, MaxRank: 4, Seed: 1}, 2)
			if err != nil {
				t.Fatal(err)
			}
			if r := reports[0]; r.OK() != c.holds {
				t.Errorf("holds %v (%d instances, %s), want %v", r.OK(), r.Instances, r.Counterexample, c.holds)
			}
		})
	}
}

// TestShapeConditionErrors: a shape condition takes a tensor variable and
// positive literals, and stands only at the top of a guard.
func TestShapeConditionErrors(t *testing.T) {
	cases := []struct{ name, guard, want string }{
		{"under-or", "(or (kernel w 1 1) (kernel w 3 3))", "may only be the guard or a conjunct of its top-level and"},
		{"of-int", "(kernel k 1 1)", "takes one tensor variable and 2 positive integers"},
		{"zero", "(kernel w 0 1)", "takes positive integer literals"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "; c\n(assert (! (forall ((w Tensor) (k Int)) (=> " + c.guard + " (= (relu w) (relu w)))) :named r))"
			_, err := Parse(c.name+".smt2", src, rules.Default())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}
