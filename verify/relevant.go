package verify

import (
	"slices"

	"rulebook/axioms"
	"rulebook/rules"
)

// Which axioms Z3 gets for a rule. The parallel operators (rules.SetParallel)
// appear in no rule of the default set, and an axiom about them can take
// part in a proof only if its parallel operators can meet the rule's terms.
// Leaving the others out keeps every proof of the default set exactly as it
// was before the parallel axioms existed (the same assertions, parsed in
// the same order, with the same declarations), and spares a parallel rule
// the axioms it cannot use.

// DegreeVarName is the Z3 Int constant that stands for a rule's degree
// variable d; the goal asserts d ≥ 1, so a proof holds for every degree.
const DegreeVarName = "d"

// parallelOpSymbols is the set of the parallel operators' Z3 symbols.
func parallelOpSymbols() map[string]bool {
	out := map[string]bool{}
	for _, op := range rules.All().Ops() {
		if op.Set == rules.SetParallel {
			for _, sym := range op.Z3 {
				out[sym] = true
			}
		}
	}
	return out
}

// parallelSymbols adds to out the symbols of par that t applies.
func parallelSymbols(t *axioms.Term, par, out map[string]bool) map[string]bool {
	if out == nil {
		out = map[string]bool{}
	}
	if !t.IsVar && par[t.Sym] {
		out[t.Sym] = true
	}
	for _, a := range t.Args {
		parallelSymbols(a, par, out)
	}
	return out
}

// ruleParallelSymbols lists the Z3 symbols of the parallel operators a rule
// applies.
func ruleParallelSymbols(r *rules.Rule) map[string]bool {
	out := map[string]bool{}
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if n.Op.Set == rules.SetParallel {
				for _, sym := range n.Op.Z3 {
					out[sym] = true
				}
			}
		}
	}
	return out
}

// RelevantAxioms lists, in the set's order, the axioms Z3 gets for a rule
// whose terms apply the parallel operators in present: those that can take
// part in E-matching. An axiom fires on a term that matches one of its
// patterns, and a pattern is a sub-term of the axiom that holds every
// variable the axiom quantifies; so the axiom can fire once the parallel
// operators of one such sub-term can occur, and firing brings in the
// parallel operators of its other terms. An operator can occur when the
// rule applies it or an axiom that can fire brings it in. Every axiom
// without parallel operators can fire.
func RelevantAxioms(set *axioms.Set, present map[string]bool) []*axioms.Axiom {
	can := map[string]bool{}
	for s := range present {
		can[s] = true
	}
	within := func(syms map[string]bool) bool {
		for s := range syms {
			if !can[s] {
				return false
			}
		}
		return true
	}
	par := parallelOpSymbols()
	type axiomSymbols struct {
		patterns []map[string]bool // parallel operators of each possible pattern
		all      map[string]bool
	}
	syms := make([]axiomSymbols, len(set.Axioms))
	for i, a := range set.Axioms {
		syms[i].all = parallelSymbols(a.RHS, par, parallelSymbols(a.LHS, par, nil))
		for _, t := range possiblePatterns(a) {
			syms[i].patterns = append(syms[i].patterns, parallelSymbols(t, par, nil))
		}
	}
	fires := make([]bool, len(set.Axioms))
	for grew := true; grew; {
		grew = false
		for i := range set.Axioms {
			if fires[i] || !slices.ContainsFunc(syms[i].patterns, within) {
				continue
			}
			fires[i], grew = true, true
			for s := range syms[i].all {
				can[s] = true
			}
		}
	}
	var out []*axioms.Axiom
	for i, a := range set.Axioms {
		if fires[i] {
			out = append(out, a)
		}
	}
	return out
}

// possiblePatterns lists the applications in an axiom's sides that hold
// every variable it quantifies: the terms Z3 may choose as its pattern.
func possiblePatterns(a *axioms.Axiom) []*axioms.Term {
	var out []*axioms.Term
	var walk func(t *axioms.Term) map[string]bool
	walk = func(t *axioms.Term) map[string]bool {
		vars := map[string]bool{}
		if t.IsVar {
			vars[t.Sym] = true
			return vars
		}
		for _, arg := range t.Args {
			for v := range walk(arg) {
				vars[v] = true
			}
		}
		if len(t.Args) > 0 && len(vars) == len(a.Vars) {
			out = append(out, t)
		}
		return vars
	}
	walk(a.LHS)
	walk(a.RHS)
	return out
}

// ConditionalAxioms names the axioms that hold only under a layout
// condition (axioms.Axiom.Conditional): Z3 gets them without it, so a
// proof that uses one is tested at other layouts before it stands.
func ConditionalAxioms(set *axioms.Set) map[string]bool {
	out := map[string]bool{}
	for _, a := range set.Axioms {
		if a.Conditional() {
			out[a.Name] = true
		}
	}
	return out
}
