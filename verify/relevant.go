package verify

import (
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
// whose terms apply the parallel operators in present: every axiom without
// parallel operators, and each axiom whose parallel operators can all
// occur. An operator can occur when the rule applies it, or when an axiom
// one of whose sides can match (it is an application whose parallel
// operators can occur) brings it in on its other side.
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
	type sides struct{ lhs, rhs map[string]bool }
	par := parallelOpSymbols()
	syms := make([]sides, len(set.Axioms))
	for i, a := range set.Axioms {
		syms[i] = sides{parallelSymbols(a.LHS, par, nil), parallelSymbols(a.RHS, par, nil)}
	}
	for grew := true; grew; {
		grew = false
		for i, a := range set.Axioms {
			for _, side := range []struct {
				term        *axioms.Term
				this, other map[string]bool
			}{{a.LHS, syms[i].lhs, syms[i].rhs}, {a.RHS, syms[i].rhs, syms[i].lhs}} {
				if side.term.IsVar || !within(side.this) {
					continue
				}
				for s := range side.other {
					if !can[s] {
						can[s], grew = true, true
					}
				}
			}
		}
	}
	var out []*axioms.Axiom
	for i, a := range set.Axioms {
		if within(syms[i].lhs) && within(syms[i].rhs) {
			out = append(out, a)
		}
	}
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
