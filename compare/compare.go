// Package compare relates a foreign rule set to a released version of ours.
// Each foreign rule is contained in ours (the same rule up to renaming of
// inputs, order of outputs and orientation), implied by ours (a short
// sequence of our rules rewrites its source into its target), or missed.
// Explain says why a missed rule is missed. docs/design.md ("Data flow",
// step 6) and docs/parallel.md ("compare on FlexFlow's file") tell the rest.
package compare

import (
	"context"
	"runtime"

	"rulebook/internal/pool"
	"rulebook/internal/progress"
	"rulebook/rewrite"
	"rulebook/rules"
)

// Relation is how a foreign rule relates to our rules.
type Relation string

const (
	Contained Relation = "contained"
	Implied   Relation = "implied"
	Missed    Relation = "missed"
	// Trivial: both sides are the same expression (a foreign rule that
	// differs only in what our operators do not model, such as layout).
	Trivial Relation = "trivial"
	// Falsified: a parallel rule false at its own degree at some combined
	// layout of its inputs where its source is laid out validly, piece for
	// piece by the exact evaluator (JudgeDegrees), or refuted by our
	// verifier.
	Falsified Relation = "refuted"
	// DegreeTwoOnly: a parallel rule written at degree 2, true there but
	// false at another degree, where FlexFlow would apply it too.
	DegreeTwoOnly Relation = "true at degree 2 only"
)

// Foreign is one rule of the foreign set.
type Foreign struct {
	Name string
	Rule *rules.Rule
}

// Verdict is the relation of one foreign rule to ours.
type Verdict struct {
	Foreign
	Text     rules.Text // canonical, oriented
	Relation Relation
	// Steps is the rewrite sequence that implies the rule; Rule fields
	// index the ours slice given to Compare.
	Steps []rewrite.Step
	// Why explains a missed rule, once Explain has run.
	Why Shortfall
	// Counterexample says where a Falsified or DegreeTwoOnly rule fails,
	// and Kind how: in value, in layout only, or with its target ill laid
	// out where its source is not.
	Counterexample string
	Kind           rules.Mismatch
	// Free are the inputs the rule's target reads and its source never
	// binds (in the file's orientation), and FreeSound and FreeWhy whether
	// that is sound (FreeInputSoundness).
	Free      []int
	FreeSound bool
	FreeWhy   string
}

// Limits bounds the search for implying rewrite sequences.
type Limits struct {
	Steps int // rewrites in a sequence
	// ExtraNodes is how many nodes a graph on the way may have beyond the
	// larger side of the rule.
	ExtraNodes int
	Explored   int // graphs visited per rule
	Workers    int
}

// DefaultLimits finds sequences of up to six rewrites.
var DefaultLimits = Limits{Steps: 8, ExtraNodes: 3, Explored: 20000}

// Compare relates every foreign rule to ours, on several goroutines.
// report hears of each rule done, as stage "compare", from any goroutine.
func Compare(ctx context.Context, ours []*rules.Rule, theirs []Foreign, lim Limits, report progress.Func) ([]Verdict, error) {
	contained := map[string]bool{}
	var rws []rewrite.Rewrite
	for i, r := range ours {
		// FlexFlow's rules are written at degree 2: ours with the degree
		// variable are related to them at that degree.
		r = r.WithDegree(rules.BaseDegree)
		_, t := r.Oriented()
		contained[t.String()] = true
		rws = append(rws, rewrite.Both(r, i)...)
	}
	workers := lim.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]Verdict, len(theirs))
	tick := report.Counter("compare", len(theirs))
	err := pool.Each(ctx, workers, len(theirs), func(_, i int) error {
		v, err := relate(ctx, theirs[i], contained, rws, lim)
		if err != nil {
			return err
		}
		out[i] = v
		tick()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func relate(ctx context.Context, f Foreign, contained map[string]bool, rws []rewrite.Rewrite, lim Limits) (Verdict, error) {
	if err := ctx.Err(); err != nil {
		return Verdict{}, err
	}
	_, text := f.Rule.Oriented()
	v := Verdict{Foreign: f, Text: text, Relation: Missed}
	if free := FreeInputs(f.Rule); len(free) > 0 {
		v.Free = free
		v.FreeSound, v.FreeWhy = FreeInputSoundness(f.Rule, free)
	}
	if rewrite.Key(&f.Rule.Src) == rewrite.Key(&f.Rule.Dst) {
		v.Relation = Trivial
		return v, nil
	}
	if IsParallel(f.Rule) {
		// Judged in the file's direction, the one its source applies in:
		// a target may be laid out validly wherever the source is, and not
		// the other way round.
		j, err := JudgeDegrees(ctx, f.Rule)
		if err != nil {
			return v, err
		}
		switch {
		case j.Vacuous:
			v.Why = Shortfall{Cause: NeverApplies}
			return v, nil
		case j.Relation != "":
			v.Relation, v.Kind, v.Counterexample = j.Relation, j.Kind, j.Counterexample
			return v, nil
		}
	}
	// Ours are related at degree 2 (Compare), so is a rule written with d,
	// now that the sweep has held it at every degree.
	at := f.Rule
	if at.HasDegreeVar() {
		at = at.WithDegree(rules.BaseDegree)
	}
	if _, t := at.Oriented(); contained[t.String()] {
		v.Relation = Contained
		return v, nil
	}
	nodes := max(len(at.Src.Nodes), len(at.Dst.Nodes)) + lim.ExtraNodes
	steps, err := rewrite.Derive(ctx, &at.Src, &at.Dst, rws, rewrite.Limits{Steps: lim.Steps, Nodes: nodes, Explored: lim.Explored, Admit: shapesFit(at)})
	if err != nil {
		return v, err
	}
	if steps != nil {
		v.Relation, v.Steps = Implied, steps
	}
	return v, nil
}
