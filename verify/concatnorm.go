package verify

import (
	"slices"

	"rulebook/rules"
)

// Concat chains. Concatenation on one axis is associative in value, but not
// in split history: split undoes the most recent concat, so concat(concat(a,
// b), c) and concat(a, concat(b, c)) split differently, and no axiom may say
// they are equal. Most rules that re-associate a chain do so where the
// history is lost anyway: an element-wise operator keeps an axis's history
// only if both operands have the same one, and a graph input has none. For
// such rules the verifier re-associates the chains whose history no split
// reads, on both sides, checks at the recorded shapes that the outputs'
// shapes and split histories are unchanged, and proves the re-associated
// rule. It tries each way of associating the chains (a chain of n parts
// has Catalan(n-1) of them), because a block axiom applies only where one
// operand's parts line up with the other's.

// maxAssociations bounds the combinations of chain associations tried for
// one rule.
const maxAssociations = 32

// chainAssociations lists, for every choice of association of every chain
// in the rule, the re-associated outputs of both sides that keep the
// outputs' shapes and split histories, the original association excluded.
func chainAssociations(ts pwTerms) [][2][]*pwTerm {
	chains := map[string]int{} // chain key → number of parts
	var keys []string
	probe := concatNormalizer{memo: map[string]*pwTerm{}, chains: chains, order: &keys}
	for _, t := range append(slices.Clone(ts.outSrc), ts.outDst...) {
		probe.norm(t, false)
	}
	var out [][2][]*pwTerm
	choice := make([]int, len(keys))
	for range maxAssociations {
		n := concatNormalizer{memo: map[string]*pwTerm{}, choice: map[string]int{}}
		for i, k := range keys {
			n.choice[k] = choice[i]
		}
		if src, dst, ok := n.outputs(ts); ok {
			out = append(out, [2][]*pwTerm{src, dst})
		}
		if !nextChoice(choice, keys, chains) {
			break
		}
	}
	return out
}

// nextChoice advances choice like an odometer whose digit i counts the
// associations of chain keys[i]; false once every combination was seen.
func nextChoice(choice []int, keys []string, chains map[string]int) bool {
	for i := range choice {
		choice[i]++
		if choice[i] < len(associations(chains[keys[i]])) {
			return true
		}
		choice[i] = 0
	}
	return false
}

// concatNormalizer rebuilds terms with their chains associated as chosen.
type concatNormalizer struct {
	memo   map[string]*pwTerm
	choice map[string]int // chain key → association index
	// chains and order, when set, collect the chains met and their parts.
	chains map[string]int
	order  *[]string
}

// outputs re-associates the outputs of both sides; ok is false when the
// shapes are unknown, the histories changed, or nothing changed.
func (n *concatNormalizer) outputs(ts pwTerms) (src, dst []*pwTerm, ok bool) {
	changed := false
	for _, side := range []struct {
		in  []*pwTerm
		out *[]*pwTerm
	}{{ts.outSrc, &src}, {ts.outDst, &dst}} {
		for _, t := range side.in {
			u := n.norm(t, false)
			if t.shape == nil || u.shape == nil || !t.shape.Equal(*u.shape) {
				return nil, nil, false
			}
			changed = changed || u.key != t.key
			*side.out = append(*side.out, u)
		}
	}
	return src, dst, changed
}

// norm rebuilds t with its chains re-associated; readBySplit marks the
// operand of a split, whose own concat must stay the most recent one.
func (n *concatNormalizer) norm(t *pwTerm, readBySplit bool) *pwTerm {
	if t.input >= 0 {
		return t
	}
	memoKey := t.key
	if readBySplit {
		memoKey = "split:" + t.key
	}
	if u, ok := n.memo[memoKey]; ok {
		return u
	}
	var u *pwTerm
	if t.op.Name == rules.NameConcat && !readBySplit {
		var leaves []*pwTerm
		for _, l := range chainLeaves(t, rules.AxisOf(t.params).Axis, nil) {
			leaves = append(leaves, n.norm(l, false))
		}
		if n.chains != nil {
			if _, seen := n.chains[t.key]; !seen && len(leaves) > 2 {
				n.chains[t.key] = len(leaves)
				*n.order = append(*n.order, t.key)
			}
		}
		u = associate(t, leaves, associations(len(leaves))[n.choice[t.key]])
	} else {
		args := make([]*pwTerm, len(t.args))
		for i, a := range t.args {
			args[i] = n.norm(a, t.op.Name == rules.NameSplit)
		}
		u = rebuilt(t, args)
	}
	n.memo[memoKey] = u
	return u
}

// chainLeaves lists the operands of the concat chain on axis rooted at t,
// left to right.
func chainLeaves(t *pwTerm, axis int, out []*pwTerm) []*pwTerm {
	if t.input >= 0 || t.op.Name != rules.NameConcat || rules.AxisOf(t.params).Axis != axis {
		return append(out, t)
	}
	for _, a := range t.args {
		out = chainLeaves(a, axis, out)
	}
	return out
}

// rebuilt is t's operator and parameters applied to args, with its shape at
// the recorded shapes when the operands' are known.
func rebuilt(t *pwTerm, args []*pwTerm) *pwTerm {
	u := &pwTerm{op: t.op, out: t.out, params: t.params, args: args, input: -1}
	u.key = termKey(t.op, t.out, t.params, args)
	if len(args) == 0 {
		u.shape = t.shape
		return u
	}
	shapes := make([]rules.Shape, 0, len(args))
	for _, a := range args {
		if a.shape == nil {
			return u
		}
		shapes = append(shapes, *a.shape)
	}
	if out, err := t.op.InferShapes(t.params, shapes); err == nil {
		u.shape = &out[t.out]
	}
	return u
}

// shape is a binary tree over consecutive parts: a leaf (nil children) or a
// split of its parts between left and right.
type shape struct{ left, right *shape }

// associations lists every binary tree over n parts, the right-nested one
// first.
func associations(n int) []*shape {
	if n <= 1 {
		return []*shape{{}}
	}
	var out []*shape
	for k := 1; k < n; k++ {
		for _, l := range associations(k) {
			for _, r := range associations(n - k) {
				out = append(out, &shape{left: l, right: r})
			}
		}
	}
	return out
}

// size is the number of parts a tree spans.
func (s *shape) size() int {
	if s.left == nil {
		return 1
	}
	return s.left.size() + s.right.size()
}

// associate builds t's concat over leaves as the tree s.
func associate(t *pwTerm, leaves []*pwTerm, s *shape) *pwTerm {
	if s.left == nil {
		return leaves[0]
	}
	k := s.left.size()
	return rebuilt(t, []*pwTerm{associate(t, leaves[:k], s.left), associate(t, leaves[k:], s.right)})
}
