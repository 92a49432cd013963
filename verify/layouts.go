package verify

import (
	"context"
	"fmt"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// Concrete tests of parallel rules. A rule with the degree variable d holds
// for every degree; it is evaluated at testDegrees, with its input shapes
// (written at rules.BaseDegree) rewritten for each. A parallel rule is
// applied wherever its source is laid out validly, so it is evaluated at
// every combined layout of its inputs (LayoutSweep): Z3's terms carry no
// layouts, and a chain of axioms may pass through one at which a step does
// not hold.

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

// LayoutSweep evaluates a rule at every combined layout of its inputs
// (rules.Rule.Sweep under rules.DefaultSweep, on exact inputs drawn from
// seed) and describes the first at which it fails.
func LayoutSweep(ctx context.Context, r *rules.Rule, seed uint64) (string, bool, error) {
	if len(r.InputShapes) != r.NumInputs {
		return "", false, nil
	}
	in := fingerprint.Inputs{Seed: seed}
	cfg := rules.DefaultSweep()
	cfg.Seed, cfg.Int, cfg.Float = seed, in.Int, in.Float
	res, err := r.Sweep(ctx, cfg)
	if err != nil || res.Counterexample == nil {
		return "", false, err
	}
	return res.Counterexample.String(), true, nil
}
