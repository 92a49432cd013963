package axioms

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// The concrete check at combined layouts. Z3 applies an axiom at whatever
// layout a chain of rewrites passes through, so a parallel axiom must hold
// wherever both of its sides are laid out validly: not only at one cut,
// partial sums or copies per tensor (layoutShapes), but with all of them
// together. For every assignment of its integer variables, and every rank
// of its tensor variables, the axiom is written as a rule and swept
// (rules.Rule.Sweep): each tensor takes every layout whose per-dimension
// degrees, sum degree and copy degree are each 1, g or g², at g = 2 and 3.

// layoutSweepRanks are the ranks a tensor variable takes in the sweep:
// Unity's operators act on dimensions 0 to 2, and linear takes rank 2 or
// 3 inputs. Rank 1, where only dimension 0 can be cut, is left to the
// check at one layout feature per tensor (layoutShapes), which takes it.
var layoutSweepRanks = []int{2, 3}

// imageSweepRanks are the ranks of an axiom about images (conv2d, the
// pools): NCHW, rank 4 alone.
var imageSweepRanks = []int{4}

// lookupSweepRanks are the ranks of an axiom about lookups (embedding):
// rank-1 indices, rank-2 tables and results.
var lookupSweepRanks = []int{1, 2}

// sweepRanksOf are the ranks a's tensors take in the sweep.
func sweepRanksOf(a *Axiom, reg *rules.Registry) []int {
	switch {
	case usesImageOps(a, reg):
		return imageSweepRanks
	case usesLookups(a, reg):
		return lookupSweepRanks
	}
	return layoutSweepRanks
}

// usesLookups reports whether the axiom applies an operator that takes a
// rank-1 operand: an embedding's indices.
func usesLookups(a *Axiom, reg *rules.Registry) bool {
	return applies(a, reg, func(op *rules.Op) bool { return slices.Contains(slices.Collect(maps.Values(op.Ranks.Operands)), 1) })
}

// axiomSweepElements bounds one evaluation of an axiom instance: the
// axioms are small identities, and a value of more elements says no more.
const axiomSweepElements = 1 << 15

// layoutSweepDegrees are the degrees g of the sweep.
var layoutSweepDegrees = []int{2, 3}

// layoutSweep is the sweep each instance gets at degree g: every
// assignment, claimed only where both sides are laid out validly.
func layoutSweep(seed uint64, g int) rules.SweepConfig {
	in := fingerprint.Inputs{Seed: seed}
	cfg := rules.DefaultSweep()
	cfg.Whole, cfg.Sampled = []int{g}, nil
	cfg.BothValid, cfg.AsWritten = true, true
	cfg.MaxElements = axiomSweepElements
	cfg.Seed, cfg.Int, cfg.Float = seed, in.Int, in.Float
	return cfg
}

// validateLayouts sweeps a parallel axiom at combined layouts. At degree g
// the axiom's own degree variables take the values of domains among g and
// g², the layout factors, so that its degrees meet the layouts they act on
// (degree 1, the identity, is left to the check at one feature per
// tensor). It returns the number of assignments evaluated and the first
// counterexample.
func validateLayouts(ctx context.Context, a *Axiom, reg *rules.Registry, domains map[string][]int, seed uint64) (int, string, error) {
	var ints, tensors []string
	for _, v := range a.Vars {
		if v.Sort == IntSort {
			ints = append(ints, v.Name)
		} else {
			tensors = append(tensors, v.Name)
		}
	}
	degrees := degreeVars(a, reg)
	evaluated := 0
	for _, g := range layoutSweepDegrees {
		cfg := layoutSweep(seed, g)
		env := map[string]int{}
		var instance func(i int) (string, error)
		instance = func(i int) (string, error) {
			if i < len(ints) {
				for _, v := range domains[ints[i]] {
					if degrees[ints[i]] && v != g && v != g*g {
						continue
					}
					env[ints[i]] = v
					if cx, err := instance(i + 1); cx != "" || err != nil {
						return cx, err
					}
				}
				return "", nil
			}
			if a.Guard != nil && !a.Guard.Holds(env) {
				return "", nil
			}
			r, err := ruleOf(a, reg, env, tensors)
			if err != nil {
				return "", err
			}
			return sweepRanks(ctx, r, cfg, len(tensors), sweepRanksOf(a, reg), func(n int) { evaluated += n }, func(cx string) string {
				return describeInstance(a, ints, env, tensors, cx)
			})
		}
		if cx, err := instance(0); cx != "" || err != nil {
			return evaluated, cx, err
		}
	}
	return evaluated, "", nil
}

// degreeVars names the integer variables that fill a degree parameter.
func degreeVars(a *Axiom, reg *rules.Registry) map[string]bool {
	out := map[string]bool{}
	for _, side := range []*Term{a.LHS, a.RHS} {
		walk(side, func(t *Term) {
			op, _, ok := reg.LookupZ3(t.Sym)
			if !ok || t.IsVar {
				return
			}
			for i, p := range op.Params {
				if p.Degree && t.Args[i].IsVar {
					out[t.Args[i].Sym] = true
				}
			}
		})
	}
	return out
}

// sweepRanks sweeps r with its tensors at every combination of ranks.
func sweepRanks(ctx context.Context, r *rules.Rule, cfg rules.SweepConfig, n int, ranks []int, count func(int), describe func(string) string) (string, error) {
	r.InputShapes = make([]rules.Shape, n)
	var rank func(k int) (string, error)
	rank = func(k int) (string, error) {
		if k == n {
			res, err := r.Sweep(ctx, cfg)
			count(res.Evaluated)
			if err != nil || res.Counterexample == nil {
				return "", err
			}
			return describe(res.Counterexample.String()), nil
		}
		for _, rk := range ranks {
			dims := make([]int, rk)
			for i := range dims {
				dims[i] = 1
			}
			r.InputShapes[k] = rules.NewShape(dims...)
			if cx, err := rank(k + 1); cx != "" || err != nil {
				return cx, err
			}
		}
		return "", nil
	}
	return rank(0)
}

// describeInstance names the integer values and the tensors of a
// counterexample the sweep found, which calls the tensors ?a, ?b, ….
func describeInstance(a *Axiom, ints []string, env map[string]int, tensors []string, cx string) string {
	var parts []string
	for _, v := range ints {
		parts = append(parts, fmt.Sprintf("%s=%d", v, env[v]))
	}
	for i, v := range tensors {
		parts = append(parts, fmt.Sprintf("%s is %s", v, rules.InputName(i)))
	}
	return fmt.Sprintf("at combined layouts (%s) %s", strings.Join(parts, ", "), cx)
}

// ruleOf writes one instance of an axiom (its integers given by env) as a
// rule whose inputs are the tensor variables, in order.
func ruleOf(a *Axiom, reg *rules.Registry, env map[string]int, tensors []string) (*rules.Rule, error) {
	r := &rules.Rule{NumInputs: len(tensors)}
	index := map[string]int{}
	for i, v := range tensors {
		index[v] = i
	}
	for _, side := range []struct {
		t *Term
		g *rules.Graph
	}{{a.LHS, &r.Src}, {a.RHS, &r.Dst}} {
		side.g.NumInputs = len(tensors)
		out, err := addTerm(side.g, side.t, reg, env, index)
		if err != nil {
			return nil, err
		}
		side.g.Outputs = []rules.Value{out}
	}
	return r, nil
}

// addTerm adds the nodes of t to g, operands first, and returns its value.
func addTerm(g *rules.Graph, t *Term, reg *rules.Registry, env map[string]int, index map[string]int) (rules.Value, error) {
	if t.IsVar {
		return rules.InputValue(index[t.Sym]), nil
	}
	op, out, ok := reg.LookupZ3(t.Sym)
	if !ok || op.IsConstant() {
		return rules.Value{}, fmt.Errorf("%s: no operator of the parallel set", t.Sym)
	}
	params := make([]int, len(op.Params))
	for i := range params {
		params[i] = t.Args[i].IntValue(env)
	}
	n := rules.Node{Op: op, Params: params}
	for _, arg := range t.Args[len(op.Params):] {
		v, err := addTerm(g, arg, reg, env, index)
		if err != nil {
			return rules.Value{}, err
		}
		n.Args = append(n.Args, v)
	}
	g.Nodes = append(g.Nodes, n)
	return rules.Value{Node: len(g.Nodes) - 1, Out: out}, nil
}
