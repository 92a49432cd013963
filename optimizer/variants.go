package optimizer

import (
	"slices"

	"rulebook/rewrite"
	"rulebook/rules"
	"rulebook/version"
)

// variant is one form of a rule the search applies: the rule at the ranks
// it was found and proved at, at any rank, or lifted one batch axis up.
//
// Rules are proved from axioms that do not model shapes, and several
// axioms give an axis a meaning that holds at one rank only: "concat 1" of
// two products is a concat of columns for matrices, of rows for batches of
// them. So a rule applies where its inputs have the ranks it was found at,
// with two exceptions that hold by construction:
//   - a rule of element-wise operators and concats and splits on axes 0
//     and 1 holds at every rank of at least 2: view each tensor as the
//     matrix of its first axis by all the others; concatenating on axis 1
//     concatenates those matrices' columns, and element-wise operators do
//     not see the view;
//   - a rule over matrices of batch-wise operators (those that act on each
//     matrix of a rank-3 batch alone) holds for batches, matrix by matrix,
//     with concat and split one axis further in.
type variant struct {
	rule int // index in the rule set
	// ranks are the ranks the rule's inputs must have; nil for any.
	ranks  []int
	lifted bool
	// conds are the rule's conditions on its inputs' shapes; a match
	// must meet them (fitsConditions).
	conds []rules.Condition
}

// batchwise reports whether an operator acts on each matrix of a rank-3
// batch independently, with concat and split one axis further in: any
// rule over matrices built from such operators alone also holds for
// batches of matrices, matrix by matrix, with the same scalars. Each
// operator's adapter says.
func batchwise(op *rules.Op) bool {
	a := adapterOf(op)
	return a != nil && a.batchwise
}

// variants are the rule set's rules as proved, and lifted to batches where
// they allow it, each as rewrites both ways; a rewrite's Rule indexes the
// variants. Patterns match commutative operators' operands in either
// order, so rules that only commute operands are left out, and the search
// keys graphs up to that order. Rules that record no shapes (some imported
// ones) cannot say at which ranks they hold: unless flat, they are left
// out and counted in unshaped.
func variants(rs *version.Set) (vs []variant, rws []rewrite.Rewrite, unshaped int) {
	add := func(v variant, r *rules.Rule) {
		for _, rw := range rewrite.Both(r, len(vs)) {
			rw.Commutative = true
			rws = append(rws, rw)
		}
		vs = append(vs, v)
	}
	for i, r := range rs.Rules {
		if rewrite.CommutativeKey(&r.Src) == rewrite.CommutativeKey(&r.Dst) {
			continue // only commutes operands: matching does that
		}
		ranks := inputRanks(r)
		switch {
		case flat(r):
			ranks = nil
		case ranks == nil:
			unshaped++
			continue
		}
		add(variant{rule: i, ranks: ranks, conds: r.Conds}, r)
		if liftable(r, ranks) {
			add(variant{rule: i, ranks: liftRanks(ranks), lifted: true, conds: r.Conds}, lift(r))
		}
	}
	return vs, rws, unshaped
}

// flat reports whether a rule uses only element-wise operators and
// concats and splits on axes 0 and 1.
func flat(r *rules.Rule) bool {
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if a := adapterOf(n.Op); a == nil || a.flat == nil || !a.flat(n.Params) {
				return false
			}
		}
	}
	return true
}

// inputRanks are the ranks of the shapes the rule was found with, or nil
// when it records none.
func inputRanks(r *rules.Rule) []int {
	if len(r.InputShapes) != r.NumInputs {
		return nil
	}
	ranks := make([]int, r.NumInputs)
	for i, s := range r.InputShapes {
		ranks[i] = s.Rank
	}
	return ranks
}

// liftable reports whether a rule over matrices (and scalars) uses only
// batch-wise operators.
func liftable(r *rules.Rule, ranks []int) bool {
	if ranks == nil || !slices.Contains(ranks, 2) {
		return false
	}
	for _, k := range ranks {
		if k != 0 && k != 2 {
			return false
		}
	}
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for _, n := range g.Nodes {
			if !batchwise(n.Op) {
				return false
			}
		}
	}
	return true
}

func liftRanks(ranks []int) []int {
	out := make([]int, len(ranks))
	for i, k := range ranks {
		out[i] = k
		if k == 2 {
			out[i] = 3
		}
	}
	return out
}

// lift is the rule over batches: concat and split move one axis in.
func lift(r *rules.Rule) *rules.Rule {
	return &rules.Rule{NumInputs: r.NumInputs, Src: liftGraph(r.Src), Dst: liftGraph(r.Dst)}
}

func liftGraph(g rules.Graph) rules.Graph {
	out := rules.Graph{NumInputs: g.NumInputs, Outputs: slices.Clone(g.Outputs), Nodes: make([]rules.Node, len(g.Nodes))}
	for i, n := range g.Nodes {
		n.Params, n.Args = slices.Clone(n.Params), slices.Clone(n.Args)
		if a := adapterOf(n.Op); a != nil && a.lift != nil {
			n.Params = a.lift(n.Params)
		}
		out.Nodes[i] = n
	}
	return out
}

// fitsRanks reports whether a match binds each input of the variant to a
// value of the rank the variant was proved at.
func (g *Graph) fitsRanks(v *variant, m *rewrite.Match) bool {
	if v.ranks == nil {
		return true
	}
	for i, bound := range m.Bound {
		if bound && g.shapeOf(m.Inputs[i]).Rank != v.ranks[i] {
			return false
		}
	}
	return true
}

// fitsConditions reports whether a match binds each input the variant's
// conditions name to a value whose shape meets them: a conditioned rule
// is proved only there (a 1×1 kernel, say), and is false elsewhere.
func (g *Graph) fitsConditions(v *variant, m *rewrite.Match) bool {
	for _, c := range v.conds {
		if c.Input >= len(m.Bound) || !m.Bound[c.Input] || !c.Holds(g.shapeOf(m.Inputs[c.Input])) {
			return false
		}
	}
	return true
}
