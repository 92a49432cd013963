package verify

import (
	"fmt"
	"strings"

	"rulebook/axioms"
	"rulebook/rules"
)

// Query renders the proof obligation of a rule as a self-contained
// SMT-LIB2 script: the registry's declarations, the named axioms, fresh
// input constants and "some output differs". Z3 (or any SMT solver) answers
// unsat exactly when the verifier proves the rule, so a user can replay or
// study a hard case outside rulebook.
func Query(reg *rules.Registry, set *axioms.Set, r *rules.Rule) string {
	var b strings.Builder
	b.WriteString("; " + r.Format().String() + "\n")
	b.WriteString(axioms.Declarations(reg))
	for _, a := range set.Axioms {
		fmt.Fprintf(&b, "(assert (! %s :named %s))\n", a.SolverFormula(), a.Name)
	}
	for i := 0; i < r.NumInputs; i++ {
		fmt.Fprintf(&b, "(declare-const input%d %s)\n", i, axioms.TensorSort)
	}
	if r.HasDegreeVar() {
		fmt.Fprintf(&b, "(declare-const %s %s)\n(assert (>= %s 1))\n", DegreeVarName, axioms.IntSort, DegreeVarName)
	}
	for _, c := range r.Conds {
		fmt.Fprintf(&b, "(assert (%s input%d %d %d))\n", c.Kind.Keyword(), c.Input, c.Dims[0], c.Dims[1])
	}
	src, dst := smtTerms(&r.Src), smtTerms(&r.Dst)
	var eqs []string
	for i := range src {
		eqs = append(eqs, "(= "+src[i]+" "+dst[i]+")")
	}
	fmt.Fprintf(&b, "(assert (not (and %s)))\n(check-sat)\n", strings.Join(eqs, " "))
	return b.String()
}

// smtTerms writes a graph's outputs as SMT-LIB2 terms over input0, input1, ….
func smtTerms(g *rules.Graph) []string {
	vals := make([][]string, len(g.Nodes))
	get := func(v rules.Value) string {
		if v.IsInput() {
			return fmt.Sprintf("input%d", v.Input())
		}
		return vals[v.Node][v.Out]
	}
	for j, n := range g.Nodes {
		var args []string
		for spec, p := range n.Op.ParamValues(n.Params) {
			args = append(args, smtParam(spec, p))
		}
		for _, a := range n.Args {
			args = append(args, get(a))
		}
		for _, sym := range n.Op.Z3 {
			if len(args) == 0 {
				vals[j] = append(vals[j], sym)
			} else {
				vals[j] = append(vals[j], "("+sym+" "+strings.Join(args, " ")+")")
			}
		}
	}
	out := make([]string, len(g.Outputs))
	for i, o := range g.Outputs {
		out[i] = get(o)
	}
	return out
}
