package optimizer

import (
	"cmp"
	"math"
	"slices"

	"github.com/zeebo/xxh3"

	"rulebook/rewrite"
	"rulebook/rules"
)

// neighbours keys, type-checks and prices the graphs one rewrite away
// from an expanded graph without building them. Building a neighbour
// copied every node, inferred every shape and priced every node again,
// for thousands of neighbours an expansion of which most are dropped;
// here a rewrite is applied in place to a view of the graph, and only
// what it changed is hashed, inferred and priced again:
//
//   - the changed nodes are the replacement's and the graph's live nodes
//     that read, directly or not, a value the rewrite redirects: no other
//     node's hash, shapes or weight-ness can change. The graph's nodes are
//     in topological order, so none before the first that reads a
//     redirected value changes, and one walk from the outputs that stops
//     there finds the changed nodes; key rehashes them, only for the
//     neighbours the search may keep, since many are priced out;
//   - the neighbour's node order (Apply's, which its cost sums in) and
//     its live nodes come from one walk from the outputs, which also
//     finds the cycles Apply refuses;
//   - a node's price depends on itself, its operands and the conv and
//     ewadd it may fuse with, so only the changed nodes, those whose
//     use count or liveness changed, and their fusion partners are
//     priced again. Costs are exact sums of prices rounded once (see
//     sumPrices), so g's sum with those prices replaced is the cost of
//     the built neighbour, bit for bit.
//
// After apply, price and key, undo restores the view to the expanded
// graph.
type neighbours struct {
	g      *Graph
	pricer pricer // nil when the cost model prices whole graphs only
	hasher rewrite.Hasher
	n      int // nodes of g
	// Per node of g: its hash, readers (of any output), liveness,
	// weight-ness, readers of its first output, fusion partner (a conv
	// and the ewadd adding its bias, each other's; else -1) and share of
	// the cost.
	base    []rewrite.Hash
	users   [][]int
	live    []bool
	weight  []bool
	uses    useCounts
	partner []int
	contrib []float64
	// total is the exact sum of contrib, g's cost before rounding: a
	// neighbour's is total with the prices it changed replaced.
	total exactSum

	// view is g with the current rewrite applied, numbered as Apply
	// numbers before it drops dead nodes: g's nodes keep their index,
	// replacement node j is n+j.
	view     Graph
	redirect [][2]rules.Value // pattern output, its replacement
	args     []rules.Value    // backing array of patched operands
	changed  []int            // g's nodes whose hash may change, the patched first
	patched  int              // how many of changed read a redirected value
	first    int              // the first of those, or n
	// rehashed lists the view's nodes whose hash changes, operands first,
	// for key.
	rehashed []int
	inC      []bool
	// differs marks the changed nodes whose shapes or weight-ness differ
	// from g's; inferred lists those whose shapes were inferred again.
	differs  []bool
	inferred []int
	state    []uint8 // of the walk from the outputs
	order    []int   // the neighbour's live nodes, in Apply's order
	hashes   []rewrite.Hash
	usesV    useCounts
	reader   []int // a reader of each node's first output, or -1
	weightV  []bool
	recheck  []bool
	repriced []int
	// stamp marks the nodes markRecounted has queued in its gen-th call;
	// cyc the nodes liveCycle has walked (see there).
	stamp, cyc []uint32
	gen        uint32
	stack      []int
	// deadReads are the operands of g's dead nodes (a mapped model may
	// have some; a built neighbour has none).
	deadReads []rules.Value

	// done holds the change signature (see signature) of every rewrite
	// applied so far: a rewrite that makes the same change makes the same
	// graph, which has been keyed already. Different rules, and one rule
	// matched with commutative operands swapped, often do: most of a
	// transformer's neighbours repeat another one's.
	done map[rewrite.Hash]bool
	// changes and repeats count the changes remembered and the repeated
	// ones: where few repeat (inception_v3: none), remembering them costs
	// more than it saves, and repeats stops.
	changes, repeats int
	// local identifies each node of the view for signatures: g's nodes
	// by index, the replacement's by operator, parameters and operands.
	local []rewrite.Hash
	sig   []byte
}

const (
	unvisited uint8 = iota
	visiting
	visited
)

// newNeighbours prepares to evaluate g's neighbours; cost is the search's
// cost model, done a map to remember changes in (emptied first: kept from
// one expansion to the next, it keeps its room).
func newNeighbours(g *Graph, cost CostModel, done map[rewrite.Hash]bool) *neighbours {
	n := len(g.G.Nodes)
	nb := &neighbours{g: g, n: n, hasher: rewrite.Hasher{Commutative: true}, users: make([][]int, n), partner: make([]int, n), contrib: make([]float64, n)}
	nb.pricer, _ = cost.(pricer)
	nb.base = nb.hasher.Nodes(&g.G, nil)
	for i, node := range g.G.Nodes {
		for _, a := range node.Args {
			if a.IsInput() {
				continue
			}
			if u := nb.users[a.Node]; len(u) == 0 || u[len(u)-1] != i {
				nb.users[a.Node] = append(u, i)
			}
		}
	}
	nb.live, nb.weight, nb.uses = g.liveNodes(), g.weightNodes(), g.uses()
	for i := range nb.partner {
		nb.partner[i] = -1
	}
	for conv, add := range g.convBiases(nb.live, nb.weight, nb.uses) {
		nb.partner[conv], nb.partner[add] = add, conv
	}
	if nb.pricer != nil {
		g.eachPriced(func(i, bias int, weight []bool) {
			nb.contrib[i] = nb.pricer.price(g, i, bias, weight)
			nb.total.add(nb.contrib[i])
		})
	}
	nb.view = *g
	nb.view.G.Nodes = append([]rules.Node(nil), g.G.Nodes...)
	nb.view.G.Outputs = append([]rules.Value(nil), g.G.Outputs...)
	nb.view.Shapes = append([][]rules.Shape(nil), g.Shapes...)
	nb.hashes = append([]rewrite.Hash(nil), nb.base...)
	nb.weightV = append([]bool(nil), nb.weight...)
	nb.inC, nb.recheck, nb.differs = make([]bool, n), make([]bool, n), make([]bool, n)
	nb.stamp = make([]uint32, n)
	nb.cyc = make([]uint32, n)
	for i, node := range g.G.Nodes {
		if !nb.live[i] {
			nb.deadReads = append(nb.deadReads, node.Args...)
		}
	}
	clear(done)
	nb.done = done
	nb.local = make([]rewrite.Hash, n)
	for i := range nb.local {
		nb.local[i] = rewrite.Hash{Hi: uint64(i), Lo: localTag}
	}
	return nb
}

// localTag tells g's nodes' identities from replacement nodes' hashes in
// signatures.
const localTag = 0x6c6f63616c6e6f64

// grow makes the per-node scratch hold size nodes.
func (nb *neighbours) grow(size int) {
	if len(nb.state) >= size {
		return
	}
	extra := size - nb.n
	nb.state, nb.usesV, nb.reader = make([]uint8, size), make(useCounts, size), make([]int, size)
	nb.cyc = append(nb.cyc[:nb.n], make([]uint32, extra)...)
	nb.hashes = append(nb.hashes[:nb.n], make([]rewrite.Hash, extra)...)
	nb.weightV = append(nb.weightV[:nb.n], make([]bool, extra)...)
	nb.inC = append(nb.inC[:nb.n], make([]bool, extra)...)
	nb.recheck = append(nb.recheck[:nb.n], make([]bool, extra)...)
	nb.local = append(nb.local[:nb.n], make([]rewrite.Hash, extra)...)
	nb.differs = append(nb.differs[:nb.n], make([]bool, extra)...)
	nb.view.G.Nodes = append(nb.view.G.Nodes[:nb.n], make([]rules.Node, extra)...)[:nb.n]
	nb.view.Shapes = append(nb.view.Shapes[:nb.n], make([][]rules.Shape, extra)...)[:nb.n]
}

// outcome is what applying a rewrite in place gave.
type outcome int

const (
	applied  outcome = iota
	failed           // Apply would fail, as for a cyclic replacement
	repeated         // an earlier rewrite of g made the same change
)

// apply applies rw at m to the view and finds the nodes it changed; key
// and price evaluate the neighbour it made, when it is applied. Call undo
// after it whatever the outcome.
func (nb *neighbours) apply(rw *rewrite.Rewrite, m *rewrite.Match) outcome {
	k := len(rw.To.Nodes)
	nb.grow(nb.n + k)
	if !nb.redirectOutputs(rw, m) || !nb.addReplacement(rw, m) {
		return failed
	}
	if nb.repeated() {
		return repeated
	}
	nb.patchReaders()
	for i, o := range nb.g.G.Outputs {
		nb.view.G.Outputs[i] = nb.follow(o)
	}
	if nb.liveCycle() {
		return failed
	}
	clear(nb.state[:nb.n+k])
	nb.rehashed = nb.rehashed[:0]
	for _, o := range nb.view.G.Outputs {
		if _, ok := nb.rehash(o); !ok {
			return failed
		}
	}
	return applied
}

// key returns the neighbour's key (as rewrite.CommutativeKey of the
// built neighbour), hashing the nodes apply found changed.
func (nb *neighbours) key() string {
	for _, id := range nb.rehashed {
		nb.hashes[id] = nb.hasher.Node(&nb.view.G.Nodes[id], nb.hashes)
	}
	return nb.hasher.Key(nb.view.G.Outputs, nb.hashes)
}

// rehash walks the view from value v, operands first, down to the nodes
// before the first patched one, and lists for key the nodes that
// changed: the replacement's, the patched ones and those that read a
// changed one. It reports whether v's node changed, and false on a
// cycle. A cycle the rewrite makes runs through changed nodes only, so
// this finds every cycle Apply would.
func (nb *neighbours) rehash(v rules.Value) (changed, ok bool) {
	id := v.Node
	if v.IsInput() || id < nb.first {
		return false, true
	}
	switch nb.state[id] {
	case visiting:
		return false, false
	case visited:
		return nb.isChanged(id), true
	}
	nb.state[id] = visiting
	node := &nb.view.G.Nodes[id]
	changed = nb.isChanged(id)
	for _, a := range node.Args {
		switch {
		case a.IsInput() || a.Node < nb.first:
			// unchanged: checked here, since most operands are
		case nb.state[a.Node] == visited:
			changed = changed || nb.isChanged(a.Node)
		default:
			c, ok := nb.rehash(a)
			if !ok {
				return false, false
			}
			changed = changed || c
		}
	}
	nb.state[id] = visited
	if changed {
		if !nb.isChanged(id) {
			nb.inC[id] = true
			nb.changed = append(nb.changed, id)
		}
		nb.rehashed = append(nb.rehashed, id)
	}
	return changed, true
}

// liveCycle reports whether the view holds a cycle that its outputs
// reach, which makes Apply refuse the rewrite; false means rehash, which
// walks from the outputs, must tell. Each cycle runs through a patched
// node: it has a new operand, and only patched and replacement nodes
// read replacement nodes. So a walk up from each patched node finds
// whether it reaches a cycle, and it stops at g's nodes before the first
// patched one, as none of them reads a patched node. A live patched node
// that reaches a cycle makes it live. In densenet121 most matches (of
// two-output patterns such as (relu ?0) ; (relu ?1), on two relus one of
// which reads the other) make a cycle, and rehash found each only after
// walking from the outputs.
func (nb *neighbours) liveCycle() bool {
	if nb.gen > math.MaxUint32-8 {
		clear(nb.cyc) // older marks would read as this walk's
		clear(nb.stamp)
		nb.gen = 0
	}
	nb.gen += 3 // marks: walking up from gen, done gen+1, reader walk gen+2
	last := nb.lastRedirected()
	for _, surely := range []bool{true, false} { // walking down to the outputs is slower
		for _, u := range nb.changed[:nb.patched] {
			if nb.surelyLive(u, last) == surely && nb.cyc[u] != nb.gen+1 && nb.reachesItself(u) {
				return surely || nb.liveInView(u, last)
			}
		}
	}
	return false
}

// lastRedirected is the last node of g whose value the rewrite redirects.
func (nb *neighbours) lastRedirected() int {
	last := 0
	for _, r := range nb.redirect {
		last = max(last, r[0].Node)
	}
	return last
}

// surelyLive reports whether node x of g is live in g and after every
// redirected value's node (last the last of them): its paths from the
// outputs pass no redirected value (a node on such a path precedes the
// value's node), so they are the view's too.
func (nb *neighbours) surelyLive(x, last int) bool {
	return x < nb.n && nb.live[x] && x > last
}

// reachesItself walks the view up from node id; it reports whether it
// meets a node it is walking up from.
func (nb *neighbours) reachesItself(id int) bool {
	nb.cyc[id] = nb.gen
	for _, a := range nb.view.G.Nodes[id].Args {
		if a.IsInput() || a.Node < nb.first {
			continue
		}
		switch nb.cyc[a.Node] {
		case nb.gen:
			return true
		case nb.gen + 1:
			continue
		}
		if nb.reachesItself(a.Node) {
			return true
		}
	}
	nb.cyc[id] = nb.gen + 1
	return false
}

// liveInView reports whether the view's outputs reach node id, walking
// down its readers until it meets an output or a node surelyLive.
func (nb *neighbours) liveInView(id, last int) bool {
	stack := append(nb.stack[:0], id)
	defer func() { nb.stack = stack[:0] }()
	mark := nb.gen + 2
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if nb.cyc[x] == mark {
			continue
		}
		nb.cyc[x] = mark
		if nb.surelyLive(x, last) || nb.isOutput(x) {
			return true
		}
		stack = nb.appendReaders(stack, x)
	}
	return false
}

// isOutput reports whether node x computes one of the view's outputs.
func (nb *neighbours) isOutput(x int) bool {
	return slices.ContainsFunc(nb.view.G.Outputs, func(o rules.Value) bool { return !o.IsInput() && o.Node == x })
}

// appendReaders appends the view's nodes that read node x.
func (nb *neighbours) appendReaders(stack []int, x int) []int {
	reads := func(r int) bool {
		return slices.ContainsFunc(nb.view.G.Nodes[r].Args, func(a rules.Value) bool { return !a.IsInput() && a.Node == x })
	}
	if x < nb.n {
		for _, r := range nb.users[x] {
			if !nb.isPatched(r) || reads(r) {
				stack = append(stack, r)
			}
		}
	} else {
		for _, r := range nb.changed[:nb.patched] {
			if reads(r) {
				stack = append(stack, r)
			}
		}
	}
	for j := nb.n; j < len(nb.view.G.Nodes); j++ {
		if reads(j) {
			stack = append(stack, j)
		}
	}
	return stack
}

// walk lists the neighbour's live nodes in Apply's order and counts the
// readers of each node's first output, graph outputs included.
func (nb *neighbours) walk() {
	size := len(nb.view.G.Nodes)
	clear(nb.state[:size])
	clear(nb.usesV[:size])
	nb.order = nb.order[:0]
	for _, o := range nb.view.G.Outputs {
		if !o.IsInput() {
			nb.visit(o.Node)
		}
	}
	for _, o := range nb.view.G.Outputs {
		if !o.IsInput() && o.Out == 0 {
			nb.usesV[o.Node]++
			nb.reader[o.Node] = -1
		}
	}
}

// repeats reports whether an earlier rewrite of g made the same change,
// and remembers this one's. A change is which values of g are redirected
// to what (see signature): the graph after it is g with exactly those
// values replaced, so an equal change gives an equal graph.
func (nb *neighbours) repeated() bool {
	if nb.changes >= rememberAtLeast && nb.repeats*100 < nb.changes {
		return false // an unnoticed repeat is keyed, and found seen
	}
	sig := xxh3.Hash128(nb.signature()) // as collision-free as keys
	if nb.done[sig] {
		nb.repeats++
		return true
	}
	nb.done[sig] = true
	nb.changes++
	return false
}

// rememberAtLeast is how many changes an expansion remembers before it
// judges whether repeats are common enough (1%) to go on.
const rememberAtLeast = 512

// signature describes the change: each redirected value of g, in order,
// with the value that replaces it, a value of g by its identity and a
// replacement node's output by the term it computes from values of g (up
// to commutative operands' order, as keys are).
func (nb *neighbours) signature() []byte {
	for j := nb.n; j < len(nb.view.G.Nodes); j++ {
		nb.local[j] = nb.hasher.Node(&nb.view.G.Nodes[j], nb.local)
	}
	slices.SortStableFunc(nb.redirect, func(a, b [2]rules.Value) int {
		return cmp.Or(cmp.Compare(a[0].Node, b[0].Node), cmp.Compare(a[0].Out, b[0].Out))
	})
	sig := nb.sig[:0]
	for i, r := range nb.redirect {
		if i+1 < len(nb.redirect) && nb.redirect[i+1][0] == r[0] {
			continue // redirected again: the last one holds
		}
		sig = nb.hasher.AppendValue(sig, r[0], nb.local)
		sig = nb.hasher.AppendValue(sig, r[1], nb.local)
	}
	nb.sig = sig
	return sig
}

// newValue is the value replacement value v stands for in the view.
func (nb *neighbours) newValue(v rules.Value, m *rewrite.Match) (rules.Value, bool) {
	if !v.IsInput() {
		return rules.Value{Node: nb.n + v.Node, Out: v.Out}, true
	}
	if !m.Bound[v.Input()] {
		return rules.Value{}, false
	}
	return m.Inputs[v.Input()], true
}

// redirectOutputs pairs each matched output with the value replacing it.
func (nb *neighbours) redirectOutputs(rw *rewrite.Rewrite, m *rewrite.Match) bool {
	if len(rw.From.Outputs) != len(rw.To.Outputs) {
		return false
	}
	nb.redirect = nb.redirect[:0]
	for j, o := range rw.From.Outputs {
		nv, ok := nb.newValue(rw.To.Outputs[j], m)
		if !ok {
			return false
		}
		nb.redirect = append(nb.redirect, [2]rules.Value{{Node: m.Nodes[o.Node], Out: o.Out}, nv})
	}
	return true
}

// follow is where a value of g is read from in the view; a value
// redirected twice goes where it went last, as in Apply.
func (nb *neighbours) follow(v rules.Value) rules.Value {
	for i := len(nb.redirect) - 1; i >= 0; i-- {
		if nb.redirect[i][0] == v {
			return nb.redirect[i][1]
		}
	}
	return v
}

// operands takes k operand slots from the shared backing array.
func (nb *neighbours) operands(k int) []rules.Value {
	if len(nb.args)+k > cap(nb.args) {
		nb.args = make([]rules.Value, 0, 2*cap(nb.args)+k) // earlier slices keep the old array
	}
	s := nb.args[len(nb.args) : len(nb.args)+k : len(nb.args)+k]
	nb.args = nb.args[:len(nb.args)+k]
	return s
}

// addReplacement appends the replacement's nodes to the view.
func (nb *neighbours) addReplacement(rw *rewrite.Rewrite, m *rewrite.Match) bool {
	nb.args = nb.args[:0]
	nb.view.G.Nodes = nb.view.G.Nodes[:nb.n+len(rw.To.Nodes)]
	nb.view.Shapes = nb.view.Shapes[:nb.n+len(rw.To.Nodes)]
	for j, node := range rw.To.Nodes {
		args := nb.operands(len(node.Args))
		for i, a := range node.Args {
			v, ok := nb.newValue(a, m)
			if !ok {
				return false
			}
			args[i] = v
		}
		node.Args = args
		nb.view.G.Nodes[nb.n+j] = node
	}
	return true
}

// patchReaders points the readers of redirected values at their
// replacements and marks them changed.
func (nb *neighbours) patchReaders() {
	nb.changed, nb.first = nb.changed[:0], nb.n
	for _, r := range nb.redirect {
		for _, u := range nb.users[r[0].Node] {
			if nb.inC[u] || !nb.reads(u) {
				continue
			}
			node := nb.g.G.Nodes[u]
			args := nb.operands(len(node.Args))
			for i, a := range node.Args {
				args[i] = nb.follow(a)
			}
			node.Args = args
			nb.view.G.Nodes[u] = node
			nb.inC[u] = true
			nb.changed = append(nb.changed, u)
			nb.first = min(nb.first, u)
		}
	}
	nb.patched = len(nb.changed)
}

// reads reports whether node u of g reads a redirected value.
func (nb *neighbours) reads(u int) bool {
	for _, a := range nb.g.G.Nodes[u].Args {
		for _, r := range nb.redirect {
			if a == r[0] {
				return true
			}
		}
	}
	return false
}

// isChanged reports whether a view node is the replacement's or a changed
// node of g.
func (nb *neighbours) isChanged(id int) bool { return id >= nb.n || nb.inC[id] }

// visit walks the view from node id as Apply's assemble does, operands
// first, counting readers; rehash has ruled out cycles.
func (nb *neighbours) visit(id int) {
	if nb.state[id] != unvisited {
		return
	}
	nb.state[id] = visiting
	node := &nb.view.G.Nodes[id]
	for _, a := range node.Args {
		if !a.IsInput() && nb.state[a.Node] == unvisited {
			nb.visit(a.Node)
		}
	}
	nb.state[id] = visited
	nb.order = append(nb.order, id)
	for _, a := range node.Args {
		if !a.IsInput() && a.Out == 0 {
			nb.usesV[a.Node]++
			nb.reader[a.Node] = id
		}
	}
}

// price type-checks the neighbour apply built and returns its cost; ok
// is false where a shape rule refuses it. It needs a pricer.
func (nb *neighbours) price() (cost float64, ok bool) {
	nb.walk()
	for _, id := range nb.order {
		if !nb.isChanged(id) {
			continue
		}
		if !nb.reshape(id) {
			return 0, false
		}
		nb.weightV[id] = nb.view.computedFromWeights(&nb.view.G.Nodes[id], nb.weightV)
		nb.differs[id] = nb.differs[id] || id >= nb.n || nb.weightV[id] != nb.weight[id]
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
		convArg = convArg || nb.view.G.Nodes[a.Node].Op.Name == "conv2d"
	}
	return node.Op.Name == "ewadd" && changedArg && convArg
}

// markRepriced lists the nodes whose price may differ from g's: the
// changed ones, those whose liveness or first output's use count changed,
// and their fusion partners in g and in the neighbour.
func (nb *neighbours) markRepriced() {
	nb.repriced = nb.repriced[:0]
	for _, id := range nb.order {
		if nb.isChanged(id) && nb.repricing(id) {
			nb.markRepricing(id)
		}
	}
	nb.markRecounted()
	for _, i := range nb.repriced[:len(nb.repriced):len(nb.repriced)] {
		if i < nb.n && nb.partner[i] >= 0 {
			nb.markRepricing(nb.partner[i])
		}
		if nb.state[i] != visited {
			continue
		}
		switch node := &nb.view.G.Nodes[i]; node.Op.Name {
		case "ewadd":
			for _, a := range node.Args {
				if !a.IsInput() && nb.view.G.Nodes[a.Node].Op.Name == "conv2d" {
					nb.markRepricing(a.Node)
				}
			}
		case "conv2d":
			if nb.usesV[i] == 1 && nb.reader[i] >= 0 {
				nb.markRepricing(nb.reader[i])
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
		live := nb.state[x] == visited
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

// contribution is node i's share of the neighbour's cost, as eachPriced
// decides it: nothing for dead and weight-only nodes and for an ewadd
// fused into its convolution as its bias.
func (nb *neighbours) contribution(i int) float64 {
	if nb.state[i] != visited || nb.weightV[i] {
		return 0
	}
	v := &nb.view
	node := &v.G.Nodes[i]
	if node.Op.Name == "ewadd" {
		if _, fused := v.biasedConv(node, nb.weightV, nb.usesV); fused {
			return 0
		}
	}
	bias := -1
	if r := nb.reader[i]; node.Op.Name == "conv2d" && nb.usesV[i] == 1 && r >= 0 && nb.state[r] == visited && !nb.weightV[r] && v.G.Nodes[r].Op.Name == "ewadd" {
		if conv, ok := v.biasedConv(&v.G.Nodes[r], nb.weightV, nb.usesV); ok && conv == i {
			bias = r
		}
	}
	return nb.pricer.price(v, i, bias, nb.weightV)
}

// undo restores the view to g.
func (nb *neighbours) undo() {
	for _, id := range nb.changed[:nb.patched] {
		nb.view.G.Nodes[id] = nb.g.G.Nodes[id]
	}
	for _, id := range nb.inferred {
		nb.view.Shapes[id] = nb.g.Shapes[id]
	}
	for _, id := range nb.changed {
		nb.inC[id], nb.differs[id] = false, false
		nb.hashes[id] = nb.base[id]
		nb.weightV[id] = nb.weight[id]
	}
	for _, i := range nb.repriced {
		nb.recheck[i] = false
	}
	nb.changed, nb.repriced, nb.inferred, nb.patched = nb.changed[:0], nb.repriced[:0], nb.inferred[:0], 0
	nb.view.G.Nodes = nb.view.G.Nodes[:nb.n]
	nb.view.Shapes = nb.view.Shapes[:nb.n]
}
