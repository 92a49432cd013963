package exchange

import "rulebook/rules"

// rankInfo infers tensor ranks over both sides of a rule, from what each
// operator's row says of its tensors' ranks (rules.RankRule), and from
// source and target outputs, which pair up.
type rankInfo struct {
	parent []int
	rankOf []int // at roots: the rank, -1 unknown
	hint   []int // at roots: the rank if nothing fixes it, -1 none
	id     map[[3]int]int
}

func (ri *rankInfo) key(side int, v rules.Value) int {
	k := [3]int{side, v.Node, v.Out}
	if v.IsInput() {
		k = [3]int{-1, v.Input(), 0}
	}
	id, ok := ri.id[k]
	if !ok {
		id = len(ri.parent)
		ri.id[k] = id
		ri.parent = append(ri.parent, id)
		ri.rankOf = append(ri.rankOf, -1)
		ri.hint = append(ri.hint, -1)
	}
	return id
}

func (ri *rankInfo) find(a int) int {
	for ri.parent[a] != a {
		ri.parent[a] = ri.parent[ri.parent[a]]
		a = ri.parent[a]
	}
	return a
}

func (ri *rankInfo) union(a, b int) {
	a, b = ri.find(a), ri.find(b)
	if a == b {
		return
	}
	if ri.rankOf[a] < 0 {
		ri.rankOf[a] = ri.rankOf[b]
	}
	if ri.hint[a] < 0 {
		ri.hint[a] = ri.hint[b]
	}
	ri.parent[b] = a
}

func (ri *rankInfo) fix(a, rank int) {
	if a = ri.find(a); ri.rankOf[a] < 0 {
		ri.rankOf[a] = rank
	}
}

func (ri *rankInfo) rank(side int, v rules.Value) int {
	root := ri.find(ri.key(side, v))
	if ri.rankOf[root] < 0 {
		return ri.hint[root]
	}
	return ri.rankOf[root]
}

func inferRanks(r *rules.Rule) *rankInfo {
	ri := &rankInfo{id: map[[3]int]int{}}
	for i, s := range r.InputShapes {
		ri.fix(ri.key(0, rules.InputValue(i)), s.Rank)
	}
	for side, g := range []*rules.Graph{&r.Src, &r.Dst} {
		for j, n := range g.Nodes {
			outs := make([]int, n.Op.Outputs)
			for o := range outs {
				outs[o] = ri.key(side, rules.Value{Node: j, Out: o})
			}
			args := make([]int, len(n.Args))
			for a, v := range n.Args {
				args[a] = ri.key(side, v)
			}
			ri.apply(n.Op.Ranks, outs, args)
		}
	}
	for k := range r.Src.Outputs {
		if k < len(r.Dst.Outputs) {
			ri.union(ri.key(0, r.Src.Outputs[k]), ri.key(1, r.Dst.Outputs[k]))
		}
	}
	return ri
}

// apply records what an operator says of the ranks of its results (outs)
// and operands (args).
func (ri *rankInfo) apply(rr rules.RankRule, outs, args []int) {
	if rr.Hint > 0 {
		ri.hint[ri.find(outs[0])] = rr.Hint
	}
	for _, a := range rr.Alike {
		ri.union(outs[0], args[a])
	}
	for _, o := range outs[1:] {
		ri.union(outs[0], o)
	}
	if rr.Result > 0 {
		ri.fix(outs[0], rr.Result)
	}
	for a := range args {
		if rank, ok := rr.Operands[a]; ok {
			ri.fix(args[a], rank)
		}
	}
}
