package verify

import (
	"context"
	"fmt"
	"sync"

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

// SweepMemo keeps the outcomes of layout sweeps within one process
// (Config.Sweeps). A sweep is a function of the rule and the seed, and a
// build's release proves again the rules its verify stage swept moments
// before: sweeping them twice was a fifth of a parallel build's time.
// Rules are swept in canonical form and keyed by their canonical text,
// input shapes and conditions, so an outcome is reused only for the rule
// it was found for. It is safe for concurrent use; the zero value is ready.
type SweepMemo struct {
	mu   sync.Mutex
	done map[string]sweepOutcome
}

type sweepOutcome struct {
	why   string
	found bool
}

// sweep is LayoutSweep, remembered; a nil memo sweeps every time.
func (m *SweepMemo) sweep(ctx context.Context, r *rules.Rule, seed uint64) (string, bool, error) {
	if m == nil {
		return LayoutSweep(ctx, r, seed)
	}
	c, t := r.Canonical()
	key := fmt.Sprintf("%d|%s => %s|%s|%s|%s", seed, t.Src, t.Dst, t.Cond, t.Inputs, t.Constants)
	m.mu.Lock()
	o, ok := m.done[key]
	m.mu.Unlock()
	if ok {
		return o.why, o.found, nil
	}
	why, found, err := LayoutSweep(ctx, c, seed)
	if err != nil {
		return "", false, err
	}
	m.mu.Lock()
	if m.done == nil {
		m.done = map[string]sweepOutcome{}
	}
	m.done[key] = sweepOutcome{why, found}
	m.mu.Unlock()
	return why, found, nil
}
