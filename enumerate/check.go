package enumerate

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// evaluated is a graph with its outputs in both arithmetics.
type evaluated struct {
	gen       *generator
	g         rules.Graph
	hashes    []uint64
	piecewise bool
	floats    [floatDraws][]*rules.FloatTensor // filled on demand
}

// floatDraws is how many float64 draws the check may use; see
// fingerprint.UniformDraws.
const floatDraws = fingerprint.UniformDraws + fingerprint.SignedDraws

// outputs returns the float outputs of draw d, evaluating on first use.
func (e *evaluated) outputs(d int) []*rules.FloatTensor {
	if e.floats[d] == nil {
		out, err := rules.Evaluate(&e.g, rules.FloatKernelOf, e.gen.floatInputs(d))
		if err != nil {
			panic(fmt.Sprintf("graph evaluated in integers but not in floats: %v", err))
		}
		e.floats[d] = out
	}
	return e.floats[d]
}

// draws is how many float draws a pair needs.
func draws(piecewise bool) int {
	if piecewise {
		return floatDraws
	}
	return fingerprint.UniformDraws
}

func (g *generator) evaluate(c graph, trivial []uint8) (*evaluated, error) {
	rg := g.l.decode(&c, trivial)
	ints, err := rules.Evaluate(&rg, rules.IntKernelOf, g.intIn)
	if err != nil {
		return nil, err
	}
	e := &evaluated{gen: g, g: rg, piecewise: rg.Piecewise()}
	for _, t := range ints {
		e.hashes = append(e.hashes, fingerprint.Tensor(t))
	}
	return e, nil
}

// match pairs each output of a with an output of b of equal hash and
// float values within tolerance; it returns b's output index for each of
// a's outputs, or nil.
func match(a, b *evaluated, tol float64) []int {
	if len(a.hashes) != len(b.hashes) {
		return nil
	}
	perm := make([]int, len(a.hashes))
	taken := make([]bool, len(b.hashes))
	for i, h := range a.hashes {
		perm[i] = -1
		for j, hb := range b.hashes {
			if !taken[j] && hb == h && closeAll(a, b, i, j, tol) {
				perm[i], taken[j] = j, true
				break
			}
		}
		if perm[i] < 0 {
			return nil
		}
	}
	return perm
}

func closeAll(a, b *evaluated, i, j int, tol float64) bool {
	for d := 0; d < draws(a.piecewise || b.piecewise); d++ {
		if !Close(a.outputs(d)[i], b.outputs(d)[j], tol) {
			return false
		}
	}
	return true
}

// Close reports whether two float tensors agree within tol relative to
// max(1, |x|, |y|).
func Close(x, y *rules.FloatTensor, tol float64) bool {
	if !x.Shape.SameDims(y.Shape) {
		return false
	}
	for i, a := range x.Data {
		b := y.Data[i]
		if math.Abs(a-b) > tol*math.Max(1, math.Max(math.Abs(a), math.Abs(b))) || math.IsNaN(a) != math.IsNaN(b) {
			return false
		}
	}
	return true
}

// check pairs each member with a representative of its class that passes
// the float test. A member that matches none is a fingerprint collision and
// becomes a further representative of its class.
func (g *generator) check(ctx context.Context, level int, recs []record, members []member) ([]Candidate, error) {
	// Group members by class, keeping sorted order inside each class.
	var groups [][]member
	for i := 0; i < len(members); {
		j := i + 1
		for j < len(members) && members[j].class == members[i].class {
			j++
		}
		groups = append(groups, members[i:j])
		i = j
	}
	results := make([][]Candidate, len(groups))
	newReps := make([][]rep, len(groups))
	var next, done, collisions atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, g.cfg.Workers)
	for w := 0; w < g.cfg.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(groups)) {
					return
				}
				if ctx.Err() != nil {
					errs[w] = ctx.Err()
					return
				}
				cands, extra, coll, err := g.checkClass(recs, groups[i])
				if err != nil {
					errs[w] = err
					return
				}
				results[i], newReps[i] = cands, extra
				collisions.Add(coll)
				d := done.Add(int64(len(groups[i])))
				if g.cfg.Progress != nil {
					g.cfg.Progress(Progress{Stage: "check", Level: level, Done: d, Total: int64(len(members))})
				}
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	var out []Candidate
	for i, grp := range groups {
		out = append(out, results[i]...)
		c := grp[0].class
		g.reps[c] = append(g.reps[c], newReps[i]...)
		for _, r := range newReps[i] {
			g.extraItems = append(g.extraItems, r.g)
		}
	}
	g.stats.Collisions += collisions.Load()
	return out, nil
}

func (g *generator) checkClass(recs []record, grp []member) ([]Candidate, []rep, int64, error) {
	class := grp[0].class
	reps := append([]rep(nil), g.reps[class]...)
	var evals []*evaluated
	for _, r := range reps {
		e, err := g.evaluate(r.g, r.trivial)
		if err != nil {
			return nil, nil, 0, err
		}
		evals = append(evals, e)
	}
	var cands []Candidate
	var extra []rep
	var collisions int64
	for _, m := range grp {
		rec := recs[m.rec]
		e, err := g.evaluate(rec.g, nil)
		if err != nil {
			return nil, nil, 0, err
		}
		found := false
		for _, re := range evals {
			perm := match(e, re, g.cfg.Tolerance)
			if perm == nil {
				continue
			}
			rule, err := g.generalize(g.ruleOf(e, re, perm))
			if err != nil {
				return nil, nil, 0, err
			}
			if trivial(rule) {
				found = true
				break // generalised to a trivial rule
			}
			canon, text := rule.Oriented()
			cands = append(cands, Candidate{Rule: canon, Text: text, Fingerprint: rec.fp})
			found = true
			break
		}
		if !found {
			collisions++
			extra = append(extra, rep{g: rec.g})
			evals = append(evals, e)
		}
	}
	return cands, extra, collisions, nil
}

func (g *generator) ruleOf(src, dst *evaluated, perm []int) *rules.Rule {
	r := &rules.Rule{NumInputs: g.l.nIn, Src: src.g, Dst: dst.g}
	r.Dst.Outputs = make([]rules.Value, len(perm))
	for i, j := range perm {
		r.Dst.Outputs[i] = dst.g.Outputs[j]
	}
	for i := 0; i < g.l.nIn; i++ {
		r.InputShapes = append(r.InputShapes, g.cfg.Pool.Classes[g.l.class[i]].Shape)
	}
	return r
}

// trivial reports a rule whose sides return the same inputs unchanged.
func trivial(r *rules.Rule) bool {
	for i, a := range r.Src.Outputs {
		if !a.IsInput() || a != r.Dst.Outputs[i] {
			return false
		}
	}
	return true
}
