package exchange

import "rulebook/rules"

// tasoInputShapes are the shapes of TASO's input pool, which its rules
// were found with.
func tasoInputShapes() ([]rules.Shape, map[string][]rules.Shape) {
	pool := rules.DefaultPool()
	return pool.Shapes(), pool.Constants
}

// guessGroups settles what the formats leave to the shapes (TASO's conv2d
// groups) when no shapes from TASO's pool fit the rule, as each row's
// encoding says (rules.KeyEncoding.Settle).
func guessGroups(r *rules.Rule) {
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for j := range g.Nodes {
			n := &g.Nodes[j]
			if n.Op.Keys.Settle == nil {
				continue
			}
			operands := make([]*rules.Op, len(n.Args))
			for a, v := range n.Args {
				if !v.IsInput() {
					operands[a] = g.Nodes[v.Node].Op
				}
			}
			n.Params = n.Op.Keys.Settle(n.Params, operands)
		}
	}
}
