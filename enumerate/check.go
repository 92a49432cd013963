package enumerate

import (
	"context"
	"math"
	"sync/atomic"

	"rulebook/fingerprint"
	"rulebook/internal/pool"
	"rulebook/internal/progress"
	"rulebook/rules"
)

// evaluated is a graph with the hashes of its outputs on the fingerprint
// inputs.
type evaluated struct {
	g      rules.Graph
	hashes []uint64
}

// floatDraws is how many float64 draws a check may use; see
// fingerprint.PiecewiseDraws.
const floatDraws = fingerprint.PiecewiseDraws

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
	e := &evaluated{g: rg}
	for _, t := range ints {
		e.hashes = append(e.hashes, fingerprint.Tensor(t))
	}
	return e, nil
}

// matchHashes pairs each output of a with an output of b of equal hash; it
// returns b's output index for each of a's outputs, or nil.
func matchHashes(a, b *evaluated) []int {
	if len(a.hashes) != len(b.hashes) {
		return nil
	}
	perm := make([]int, len(a.hashes))
	taken := make([]bool, len(b.hashes))
	for i, h := range a.hashes {
		perm[i] = -1
		for j, hb := range b.hashes {
			if !taken[j] && hb == h {
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
func (g *generator) check(ctx context.Context, level int, members []member) ([]Candidate, error) {
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
	var done, collisions atomic.Int64
	err := pool.Each(ctx, g.cfg.Workers, len(groups), func(_, i int) error {
		cands, extra, coll, err := g.checkClass(groups[i])
		if err != nil {
			return err
		}
		results[i], newReps[i] = cands, extra
		collisions.Add(coll)
		d := done.Add(int64(len(groups[i])))
		g.cfg.Progress.Report(progress.Step{Stage: "check", Level: level, Done: d, Total: int64(len(members))})
		return nil
	})
	if err != nil {
		return nil, err
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

func (g *generator) checkClass(grp []member) ([]Candidate, []rep, int64, error) {
	class := grp[0].class
	var evals []*evaluated
	for _, r := range g.reps[class] {
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
		e, err := g.evaluate(m.g, nil)
		if err != nil {
			return nil, nil, 0, err
		}
		found := false
		for _, re := range evals {
			perm := matchHashes(e, re)
			if perm == nil {
				continue
			}
			cand, ok := g.candidate(g.ruleOf(e, re, perm), m.fp)
			if !ok {
				continue // equal fingerprints, different floats
			}
			if cand != nil {
				cands = append(cands, *cand)
			}
			found = true
			break
		}
		if !found {
			collisions++
			extra = append(extra, rep{g: m.g})
			evals = append(evals, e)
		}
	}
	return cands, extra, collisions, nil
}

// candidate generalises a pair using the exact modular test, then runs the
// float draws once on the result (falling back to the pair itself if the
// generalisation fails them). ok is false when even the pair fails: a
// fingerprint collision. A nil candidate with ok means the rule is trivial.
func (g *generator) candidate(pair *rules.Rule, fp uint64) (c *Candidate, ok bool) {
	general := g.generalize(pair)
	for _, r := range []*rules.Rule{general, pair} {
		if trivial(r) {
			return nil, true
		}
		canon, text := r.Oriented()
		if g.floatVerified(r, text) {
			return &Candidate{Rule: canon, Text: text, Fingerprint: fp}, true
		}
		if r == pair {
			break
		}
	}
	return nil, false
}

// floatVerified runs the float draws on r, remembering verdicts by text and
// shapes: many pairs generalise to the same rule.
func (g *generator) floatVerified(r *rules.Rule, text rules.Text) bool {
	key := text.String() + "|" + text.Inputs + "|" + text.Constants
	g.verdictMu.Lock()
	v, seen := g.verdicts[key]
	g.verdictMu.Unlock()
	if seen {
		return v
	}
	v = g.floatHolds(r)
	g.verdictMu.Lock()
	g.verdicts[key] = v
	g.verdictMu.Unlock()
	return v
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
