package verify

import (
	"context"
	"fmt"
	"slices"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// Concrete tests of parallel rules. A rule with the degree variable d holds
// for every degree; it is evaluated at testDegrees, with its input shapes
// (written at rules.BaseDegree) rewritten for each. A parallel rule is
// applied wherever both sides are laid out validly, so it is tested at
// layouts other than the recorded ones: that is where an axiom with a
// layout condition (reduce of copies scales, which partial sums do not) can
// have been used wrongly.

// testDegrees are the degrees a rule with the degree variable is tested at.
var testDegrees = []int{2, 3, 4}

// degreeSizeMultiple is the multiple every extent is scaled to when a
// d-rule's shapes are rewritten for a degree: 12 is divisible by 2, 3 and 4.
const degreeSizeMultiple = 12

// ruleAtDegree is a rule with the degree variable substituted, and the
// prefix its counterexamples get.
type ruleAtDegree struct {
	rule   *rules.Rule
	prefix string
}

// atDegrees lists the rule at each of testDegrees when it has the degree
// variable, else the rule itself. A degree at which the recorded shapes
// cannot be rewritten is left out.
func atDegrees(r *rules.Rule) []ruleAtDegree {
	if !r.HasDegreeVar() {
		return []ruleAtDegree{{rule: r}}
	}
	var out []ruleAtDegree
	for _, d := range testDegrees {
		at := r.WithDegree(d)
		shapes, err := r.InputShapesAtDegree(d, degreeSizeMultiple)
		if err != nil {
			continue
		}
		at.InputShapes = shapes
		out = append(out, ruleAtDegree{rule: at, prefix: fmt.Sprintf("at d=%d ", d)})
	}
	return out
}

// isParallel reports whether a rule applies a parallel operator or has an
// input with a parallel layout.
func isParallel(r *rules.Rule) bool {
	for _, s := range r.InputShapes {
		if s.Parallel() {
			return true
		}
	}
	return r.UsesParallelOps()
}

// withLayout gives each shape of ss the layout of like, where it is valid,
// and drops the shapes where it is not.
func withLayout(ss []rules.Shape, like rules.Shape) []rules.Shape {
	out := ss[:0]
	for _, s := range ss {
		s.Degrees, s.Sum, s.Copy = like.Degrees, like.Sum, like.Copy
		if s.CheckLayout() == nil {
			out = append(out, s)
		}
	}
	return out
}

// ruleDegrees lists the degrees a rule's parallel operators use, or 2 when
// it has none.
func ruleDegrees(r *rules.Rule) []int {
	var out []int
	r.EachDegree(func(d int) {
		if d > 1 && !slices.Contains(out, d) {
			out = append(out, d)
		}
	})
	if len(out) == 0 {
		out = []int{2}
	}
	return out
}

// layoutChanges are the ways layoutNeighbours changes an input's layout by
// a degree g: more partial sums, more copies, none of either, one device,
// or dimension i cut g times more (the entries from cutDimension on).
const (
	addSums = iota
	addCopies
	dropSums
	dropCopies
	plainLayout
	cutDimension
)

func changeLayout(s rules.Shape, change, g int) rules.Shape {
	switch change {
	case addSums:
		s.Sum = s.SumDegree() * g
	case addCopies:
		s.Copy = s.CopyDegree() * g
	case dropSums:
		s.Sum = 0
	case dropCopies:
		s.Copy = 0
	case plainLayout:
		s = s.Plain()
	default:
		if i := change - cutDimension; i < s.Rank {
			s.Degrees[i] = s.Degree(i) * g
		}
	}
	return s
}

// layoutNeighbours evaluates the rule at the layouts one change away from
// its recorded ones: each change (layoutChanges) by each degree the rule
// uses, made to every input at once or to one input, at the recorded
// extents and at extents scaled by the degree (so that it divides them).
// It describes the first assignment where both sides are laid out validly
// and differ, in values or in the output's layout: a rewrite that changes
// the layout of what it computes changes the pieces the devices hold.
func layoutNeighbours(ctx context.Context, r *rules.Rule, seed uint64) (string, bool, error) {
	saved := saveShapes(r)
	defer saved.restore(r)
	in := fingerprint.Inputs{Seed: seed}
	for _, g := range ruleDegrees(r) {
		for change := addSums; change < cutDimension+rules.MaxRank; change++ {
			for _, scale := range neighbourScales(saved.inputs, g) {
				for target := -1; target < r.NumInputs; target++ {
					if err := ctx.Err(); err != nil {
						return "", false, err
					}
					shapes := make([]rules.Shape, r.NumInputs)
					for i, s := range saved.inputs {
						t := s
						for k := 0; k < t.Rank; k++ {
							t.Dims[k] *= scale
						}
						if target < 0 || target == i {
							t = changeLayout(t, change, g)
						}
						shapes[i] = t
					}
					r.InputShapes = shapes
					if FloatTestable(r) != nil {
						continue
					}
					for _, stream := range []uint64{0, 1} { // uniform, one-signed
						if why, found := differs(r, in, stream); found {
							return fmt.Sprintf("at %s: %s", shapeList(shapes), why), true, nil
						}
					}
				}
			}
		}
	}
	return "", false, nil
}

// neighbourScales are the factors layoutNeighbours grows the recorded
// extents by: 1, and g only where g does not divide some extent already
// (growing divisible extents costs time, g³ per linear, and finds nothing
// new about layouts).
func neighbourScales(inputs []rules.Shape, g int) []int {
	for _, s := range inputs {
		for k := 0; k < s.Rank; k++ {
			if s.Dims[k]%g != 0 {
				return []int{1, g}
			}
		}
	}
	return []int{1}
}

// LayoutNeighbours is layoutNeighbours at each degree a rule with the
// degree variable is tested at (atDegrees).
func LayoutNeighbours(ctx context.Context, r *rules.Rule, seed uint64) (string, bool, error) {
	if len(r.InputShapes) != r.NumInputs {
		return "", false, nil
	}
	for _, at := range atDegrees(r) {
		if why, found, err := layoutNeighbours(ctx, at.rule, seed); found || err != nil {
			return at.prefix + why, found, err
		}
	}
	return "", false, nil
}
