package exchange

import "rulebook/rules"

// tasoInputShapes are the shapes of TASO's input pool, which its rules
// were found with.
func tasoInputShapes() ([]rules.Shape, map[string][]rules.Shape) {
	pool := rules.DefaultPool()
	return pool.Shapes(), pool.Constants
}

// guessGroups settles the groups TASO leaves to the shapes when no shapes
// from its pool fit the rule: depth-wise over a C_pool kernel, else 1.
func guessGroups(r *rules.Rule) {
	for _, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for j := range g.Nodes {
			n := &g.Nodes[j]
			if n.Op.Name != "conv2d" || n.Params[3] != rules.GroupsInferred {
				continue
			}
			n.Params[3] = 1
			if k := n.Args[1]; !k.IsInput() && g.Nodes[k.Node].Op.Name == "C_pool" {
				n.Params[3] = rules.GroupsDepthwise
			}
		}
	}
}
