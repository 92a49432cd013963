package optimizer

import (
	"slices"

	"rulebook/rules"
)

// price type-checks the neighbour apply built and returns its cost; ok
// is false where a shape rule refuses it. It needs a pricer.
func (nb *neighbours) price() (cost float64, ok bool) {
	nb.count()
	if !nb.reshapeChanged() {
		return 0, false
	}
	nb.markRepriced()
	total := nb.total
	for _, i := range nb.repriced {
		if i < nb.n {
			total.sub(nb.contrib[i])
		}
		total.add(nb.contribution(i))
	}
	return total.round(), true
}

// counts are the neighbour's live nodes and the readers of each node's
// first output, as g's were changed by the rewrite (see count). Between
// rewrites they hold g's, and undo restores the nodes in touched.
type counts struct {
	cnt     []int32   // live readers' reads of any output, outputs' included
	usesV   useCounts // live readers' reads of the first output, outputs' included
	liveV   []bool
	applied []bool // whether the operands' counts hold the node's reads of them
	inT     []bool // in touched
	touched []int
	queue   []int
	walked  bool // whether walk counted every node instead
}

// grow makes room for extra replacement nodes after g's n.
func (c *counts) grow(n, extra int) {
	c.cnt = append(c.cnt[:n], make([]int32, extra)...)
	c.usesV = append(c.usesV[:n], make(useCounts, extra)...)
	c.liveV = append(c.liveV[:n], make([]bool, extra)...)
	c.applied = append(c.applied[:n], make([]bool, extra)...)
	c.inT = append(c.inT[:n], make([]bool, extra)...)
}

// countReads counts, for each node of g, its live readers' reads, which
// are the neighbours' counts before a rewrite changes them.
func (nb *neighbours) countReads() {
	nb.cntG, nb.usesG = make([]int32, nb.n), make(useCounts, nb.n)
	count := func(v rules.Value) {
		if !v.IsInput() {
			nb.cntG[v.Node]++
			if v.Out == 0 {
				nb.usesG[v.Node]++
			}
		}
	}
	for i, node := range nb.g.G.Nodes {
		if nb.live[i] {
			for _, a := range node.Args {
				count(a)
			}
		}
	}
	for _, o := range nb.g.G.Outputs {
		count(o)
	}
	nb.cnt, nb.usesV = slices.Clone(nb.cntG), slices.Clone(nb.usesG)
	nb.liveV, nb.applied = slices.Clone(nb.live), slices.Clone(nb.live)
	nb.inT = make([]bool, nb.n)
}

// count finds the neighbour's live nodes (liveV) and the readers of each
// node's first output (usesV). The rewrite changed what the patched
// nodes, the replacement's and the outputs read, so it starts from g's
// counts and moves those reads: a node whose count falls to zero dies
// and stops reading its operands, one whose count rises from zero comes
// alive and starts to, in turn. Without cycles this ends with exactly
// the nodes the outputs reach, having touched only those whose counts
// changed, where walking the neighbour took a fifth of a search. A view
// with a cycle, which liveCycle found dead, is walked whole instead.
func (nb *neighbours) count() {
	if nb.cyclic {
		nb.walk()
		return
	}
	queue := nb.queue[:0]
	for _, u := range nb.changed[:nb.patched] {
		if nb.applied[u] {
			nb.touch(u)
			nb.applied[u] = false
			for _, a := range nb.g.G.Nodes[u].Args {
				queue = nb.moveRead(queue, a, -1)
			}
		}
		queue = append(queue, u)
	}
	for i, o := range nb.g.G.Outputs {
		if v := nb.view.G.Outputs[i]; v != o {
			queue = nb.moveRead(queue, o, -1)
			queue = nb.moveRead(queue, v, +1)
		}
	}
	for j := nb.n; j < len(nb.view.G.Nodes); j++ {
		queue = append(queue, j)
	}
	for len(queue) > 0 {
		x := queue[len(queue)-1]
		queue = nb.settle(queue[:len(queue)-1], x)
	}
	nb.queue = queue
}

// settle makes node x's reads count if it is live, and not if it is
// dead; it queues the operands whose liveness may change.
func (nb *neighbours) settle(queue []int, x int) []int {
	nb.touch(x)
	live := nb.cnt[x] > 0
	nb.liveV[x] = live
	if live == nb.applied[x] {
		return queue
	}
	nb.applied[x] = live
	d := int32(-1)
	if live {
		d = 1
	}
	for _, a := range nb.view.G.Nodes[x].Args {
		queue = nb.moveRead(queue, a, d)
	}
	return queue
}

// moveRead adds d (±1) reads of value v, and queues v's node where its
// count rises from or falls to zero.
func (nb *neighbours) moveRead(queue []int, v rules.Value, d int32) []int {
	if v.IsInput() {
		return queue
	}
	x := v.Node
	nb.touch(x)
	nb.cnt[x] += d
	if v.Out == 0 {
		nb.usesV[x] += int(d)
	}
	if c := nb.cnt[x]; c == 0 || c == 1 && d > 0 {
		queue = append(queue, x)
	}
	return queue
}

func (nb *neighbours) touch(x int) {
	if !nb.inT[x] {
		nb.inT[x] = true
		nb.touched = append(nb.touched, x)
	}
}

// restoreCounts makes the counts g's again.
func (nb *neighbours) restoreCounts() {
	for _, x := range nb.touched {
		nb.inT[x] = false
		if x < nb.n {
			nb.cnt[x], nb.usesV[x], nb.liveV[x], nb.applied[x] = nb.cntG[x], nb.usesG[x], nb.live[x], nb.live[x]
		} else {
			nb.cnt[x], nb.usesV[x], nb.liveV[x], nb.applied[x] = 0, 0, false, false
		}
	}
	nb.touched = nb.touched[:0]
	if nb.walked {
		nb.walked = false
		copy(nb.usesV, nb.usesG)
		clear(nb.usesV[nb.n:])
		copy(nb.liveV, nb.live)
		clear(nb.liveV[nb.n:])
	}
}

// walk finds the neighbour's live nodes and counts the readers of each
// node's first output, graph outputs included, by walking it from the
// outputs.
func (nb *neighbours) walk() {
	size := len(nb.view.G.Nodes)
	clear(nb.state[:size])
	clear(nb.usesV[:size])
	for _, o := range nb.view.G.Outputs {
		if !o.IsInput() {
			nb.visit(o.Node)
		}
	}
	for _, o := range nb.view.G.Outputs {
		if !o.IsInput() && o.Out == 0 {
			nb.usesV[o.Node]++
		}
	}
	for i := range size {
		nb.liveV[i] = nb.state[i] == visited
	}
	nb.walked = true
}

// visit walks the view from node id as Apply's assemble does, operands
// first, counting readers; liveCycle has ruled out cycles it reaches.
func (nb *neighbours) visit(id int) {
	if nb.state[id] != unvisited {
		return
	}
	nb.state[id] = visiting
	node := &nb.view.G.Nodes[id]
	for _, a := range node.Args {
		if !a.IsInput() {
			nb.visit(a.Node)
			if a.Out == 0 {
				nb.usesV[a.Node]++
			}
		}
	}
	nb.state[id] = visited
}

// reshapeChanged infers the shapes and weight-ness of the live nodes the
// rewrite may have changed, operands first, and lists them in dirty; it
// reports false where one does not type-check.
func (nb *neighbours) reshapeChanged() bool {
	if kept, ok := nb.keepsShapes(); kept {
		return ok
	}
	nb.findChanged()
	nb.dirty = append(nb.dirty[:0], nb.downstream...)
	for _, id := range nb.dirty {
		if !nb.reshape(id) {
			return false
		}
		nb.weightV[id] = nb.view.computedFromWeights(&nb.view.G.Nodes[id], nb.weightV)
		nb.differs[id] = nb.differs[id] || id >= nb.n || nb.weightV[id] != nb.weight[id]
	}
	return true
}

// keepsShapes infers the live replacement nodes' shapes and weight-ness
// from g's and reports whether the values the rewrite redirects keep
// theirs (kept), as they do where a rule's sides are equivalent. Then
// every live node of the view has the shapes and weight-ness its
// operands' give it, g's nodes keeping g's, and in a graph without cycles
// such an assignment is the only one: no node of g changes, and the
// dirty nodes are the live replacement and patched ones. ok is false
// where a replacement node does not type-check, which Infer confirms
// where none so far read a node of g computed from a patched one, whose
// shapes might change. keepsShapes gives up on those, and where a
// redirected value's replacement differs in being computed from weights
// alone. Where both are (most of a transformer's neighbours rewrite how
// a weight is computed), the weight-only nodes computed from the patched
// ones and their readers are dirty too (see markWeightReaders).
func (nb *neighbours) keepsShapes() (kept, ok bool) {
	nb.dirty = nb.dirty[:0]
	late := false // whether a replacement node read a node of g computed from a patched one
	for j := nb.n; j < len(nb.view.G.Nodes); j++ {
		node := &nb.view.G.Nodes[j]
		if !nb.liveV[j] {
			continue
		}
		late = late || slices.ContainsFunc(node.Args, nb.fromPatched)
		out, err := nb.view.inferNode(node)
		if err != nil {
			return !late, false
		}
		nb.view.Shapes[j] = out
		nb.weightV[j] = nb.view.computedFromWeights(node, nb.weightV)
		nb.differs[j] = true
		nb.dirty = append(nb.dirty, j)
	}
	weights := false
	for _, r := range nb.redirect {
		if to := r[1]; nb.liveValue(to) && (nb.view.shapeOf(to) != nb.g.shapeOf(r[0]) || nb.weightValue(to) != nb.weight[r[0].Node]) {
			return false, true
		}
		weights = weights || nb.weight[r[0].Node]
	}
	for _, u := range nb.changed[:nb.patched] {
		if nb.liveV[u] {
			nb.dirty = append(nb.dirty, u)
		}
	}
	if weights {
		nb.markWeightReaders()
	}
	return true, true
}

// markWeightReaders marks changed the weight-only nodes of g computed
// from a patched one, and lists them and the nodes that read them as
// dirty: a rewrite that keeps a weight's shape and its being computed
// from weights alone changes no other node's shapes or weight-ness, but
// may change whether it is a channel bias (see channelBias), and with it
// the price of an ewadd that adds it to a convolution (see repricing).
func (nb *neighbours) markWeightReaders() {
	stack := nb.stack[:0]
	for _, u := range nb.changed[:nb.patched] {
		if nb.weight[u] {
			stack = append(stack, u)
		}
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, r := range nb.users[x] {
			if nb.inC[r] {
				continue
			}
			nb.inC[r] = true
			nb.changed = append(nb.changed, r)
			if nb.liveV[r] {
				nb.dirty = append(nb.dirty, r)
			}
			if nb.weight[r] {
				stack = append(stack, r)
			}
		}
	}
	nb.stack = stack
}

// liveValue reports whether a value of the view is a graph input or a
// live node's.
func (nb *neighbours) liveValue(v rules.Value) bool { return v.IsInput() || nb.liveV[v.Node] }

// weightValue reports whether a value of the view is a weight or
// computed from weights alone.
func (nb *neighbours) weightValue(v rules.Value) bool {
	if v.IsInput() {
		return nb.g.Inputs[v.Input()].IsWeight()
	}
	return nb.weightV[v.Node]
}

// reshape infers a changed node's shapes, unless its operands' shapes
// are those they had in g, and marks whether they differ from g's.
func (nb *neighbours) reshape(id int) bool {
	node := &nb.view.G.Nodes[id]
	if id < nb.n {
		same := true
		for i, a := range node.Args {
			same = same && (!nb.isPatched(id) && (a.IsInput() || !nb.differs[a.Node]) ||
				nb.view.shapeOf(a) == nb.g.shapeOf(nb.g.G.Nodes[id].Args[i]))
		}
		if same {
			return true
		}
	}
	out, err := nb.view.inferNode(node)
	if err != nil {
		return false
	}
	nb.view.Shapes[id] = out
	if id < nb.n {
		nb.inferred = append(nb.inferred, id)
		nb.differs[id] = !slices.Equal(out, nb.g.Shapes[id])
	}
	return true
}

// isPatched reports whether node id of g reads a redirected value.
func (nb *neighbours) isPatched(id int) bool {
	return id < nb.n && nb.inC[id] && slices.Contains(nb.changed[:nb.patched], id)
}

// repricing reports whether a live changed node's price may differ from
// g's: a replacement node, one that reads a redirected value or whose
// shapes or weight-ness differ, one that reads such a node, and an ewadd
// of a convolution that reads a changed node (whose being a channel bias
// may differ).
func (nb *neighbours) repricing(id int) bool {
	if id >= nb.n || nb.differs[id] || nb.isPatched(id) {
		return true
	}
	node := &nb.view.G.Nodes[id]
	changedArg, convArg := false, false
	for _, a := range node.Args {
		if a.IsInput() {
			continue
		}
		if nb.differs[a.Node] {
			return true
		}
		changedArg = changedArg || nb.isChanged(a.Node)
		convArg = convArg || takesBias(nb.view.G.Nodes[a.Node].Op)
	}
	return addsBias(node.Op) && changedArg && convArg
}

// markRepriced lists the nodes whose price may differ from g's: the
// dirty ones, those whose liveness or first output's use count changed,
// and their fusion partners in g and in the neighbour.
func (nb *neighbours) markRepriced() {
	nb.repriced = nb.repriced[:0]
	for _, id := range nb.dirty {
		if nb.repricing(id) {
			nb.markRepricing(id)
		}
	}
	nb.markRecounted()
	for _, i := range nb.repriced[:len(nb.repriced):len(nb.repriced)] {
		if i < nb.n && nb.partner[i] >= 0 {
			nb.markRepricing(nb.partner[i])
		}
		if !nb.liveV[i] {
			continue
		}
		switch node := &nb.view.G.Nodes[i]; {
		case addsBias(node.Op):
			for _, a := range node.Args {
				if !a.IsInput() && takesBias(nb.view.G.Nodes[a.Node].Op) {
					nb.markRepricing(a.Node)
				}
			}
		case takesBias(node.Op):
			if r := nb.soleReader(i); r >= 0 {
				nb.markRepricing(r)
			}
		}
	}
}

// markRecounted marks the nodes of g whose liveness or first output's
// use count changed. Only a node a changed reader read, or reads now, can
// lose or gain readers: a redirected value's, a patched node's operands
// before and after, the replacement's operands, and those of a node that
// died or came alive, in turn.
func (nb *neighbours) markRecounted() {
	nb.gen++
	stack := nb.stack[:0]
	push := func(v rules.Value) {
		if !v.IsInput() && v.Node < nb.n && nb.stamp[v.Node] != nb.gen {
			nb.stamp[v.Node] = nb.gen
			stack = append(stack, v.Node)
		}
	}
	for _, r := range nb.redirect {
		push(r[0])
		push(r[1])
	}
	for _, v := range nb.deadReads {
		push(v) // g's count has dead readers, the neighbour's has not
	}
	for _, id := range nb.changed[:nb.patched] {
		for i, a := range nb.view.G.Nodes[id].Args {
			push(a)
			push(nb.g.G.Nodes[id].Args[i])
		}
	}
	for j := nb.n; j < len(nb.view.G.Nodes); j++ {
		for _, a := range nb.view.G.Nodes[j].Args {
			push(a)
		}
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		live := nb.liveV[x]
		if live != nb.live[x] || nb.usesV[x] != nb.uses[x] {
			nb.markRepricing(x)
		}
		if live != nb.live[x] {
			for _, a := range nb.view.G.Nodes[x].Args {
				push(a)
			}
		}
	}
	nb.stack = stack
}

func (nb *neighbours) markRepricing(i int) {
	if !nb.recheck[i] {
		nb.recheck[i] = true
		nb.repriced = append(nb.repriced, i)
	}
}

// soleReader is the live node that reads node i's first output when it
// has one reader, which no graph output is; else -1.
func (nb *neighbours) soleReader(i int) int {
	if nb.usesV[i] != 1 {
		return -1
	}
	reads := func(r int) bool {
		return nb.liveV[r] && slices.Contains(nb.view.G.Nodes[r].Args, rules.Value{Node: i})
	}
	if i < nb.n {
		if k := slices.IndexFunc(nb.users[i], reads); k >= 0 {
			return nb.users[i][k] // a patched one reads in the view: checked
		}
	}
	if k := slices.IndexFunc(nb.changed[:nb.patched], reads); k >= 0 {
		return nb.changed[k]
	}
	for j := nb.n; j < len(nb.view.G.Nodes); j++ {
		if reads(j) {
			return j
		}
	}
	return -1
}

// contribution is node i's share of the neighbour's cost, as eachPriced
// decides it: nothing for dead and weight-only nodes and for an ewadd
// fused into its convolution as its bias.
func (nb *neighbours) contribution(i int) float64 {
	if !nb.liveV[i] || nb.weightV[i] {
		return 0
	}
	v := &nb.view
	node := &v.G.Nodes[i]
	if addsBias(node.Op) {
		if _, fused := v.biasedConv(node, nb.weightV, nb.usesV); fused {
			return 0
		}
	}
	return nb.pricer.price(v, i, nb.fusedBias(i), nb.weightV)
}

// fusedBias is the ewadd that adds a channel bias to convolution i in
// the neighbour, or -1.
func (nb *neighbours) fusedBias(i int) int {
	v := &nb.view
	if !takesBias(v.G.Nodes[i].Op) {
		return -1
	}
	r := nb.soleReader(i)
	if r < 0 || nb.weightV[r] || !addsBias(v.G.Nodes[r].Op) {
		return -1
	}
	if conv, ok := v.biasedConv(&v.G.Nodes[r], nb.weightV, nb.usesV); ok && conv == i {
		return r
	}
	return -1
}
