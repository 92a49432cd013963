package optimizer

import (
	"cmp"
	"math"
	"slices"

	"github.com/zeebo/xxh3"

	"rulebook/rewrite"
	"rulebook/rules"
)

// neighbours type-checks and prices the graphs one rewrite away from an
// expanded graph without building them. Most neighbours are dropped, so
// building each one was waste. A rewrite is applied in place to a view of
// the graph (apply), only what it changed is inferred and priced again
// (price), and undo restores the view. The neighbour gets the cost the
// built graph would, bit for bit. Neighbours are not keyed here: the
// search keys the few graphs it expands (search.step). docs/optimizer.md
// ("Neighbours without building them") tells how.
type neighbours struct {
	g      *Graph
	pricer pricer // nil when the cost model prices whole graphs only
	hasher rewrite.Hasher
	n      int // nodes of g
	// Per node of g: its readers (of any output), liveness, weight-ness,
	// readers of its first output, fusion partner (a conv and the ewadd
	// adding its bias, each other's; else -1) and share of the cost.
	users   [][]int
	live    []bool
	weight  []bool
	uses    useCounts
	partner []int
	// above holds, in rows of words, the nodes each node of g is computed
	// from, directly or not, as bits.
	above []uint64
	words int
	// Per node of g: its live readers' reads of any output and of the
	// first one, graph outputs included.
	cntG    []int32
	usesG   useCounts
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
	changed  []int            // g's nodes that may change: the patched, then those markChanged finds
	patched  int              // how many of changed read a redirected value
	first    int              // the first of those, or n
	// downstream lists the view's changed nodes, operands first: those
	// whose shapes may have to be inferred again.
	downstream []int
	inC        []bool
	// differs marks the changed nodes whose shapes or weight-ness differ
	// from g's; inferred lists those whose shapes were inferred again.
	differs  []bool
	inferred []int
	state    []uint8 // of the walks from the outputs
	weightV  []bool
	// dirty lists the live changed nodes price inferred again, operands
	// first; repriced those it priced again, recheck marks them.
	dirty    []int
	recheck  []bool
	repriced []int
	// found says whether markChanged has listed the changed nodes; cyclic
	// whether the view holds a cycle, which its outputs do not reach.
	found, cyclic bool
	special       []uint8 // walk states of mayCycle
	counts
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
	nb.findAbove()
	nb.countReads()
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

// findAbove fills above, operands first: a node is computed from its
// operands and from what they are computed from.
func (nb *neighbours) findAbove() {
	w := (nb.n + 63) / 64
	nb.words, nb.above = w, make([]uint64, nb.n*w)
	for i, node := range nb.g.G.Nodes {
		row := nb.above[i*w : (i+1)*w]
		for _, a := range node.Args {
			if a.IsInput() {
				continue
			}
			for k, bits := range nb.above[a.Node*w : (a.Node+1)*w] {
				row[k] |= bits
			}
			row[a.Node/64] |= 1 << (a.Node % 64)
		}
	}
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
	nb.state = make([]uint8, size)
	nb.counts.grow(nb.n, extra)
	nb.cyc = append(nb.cyc[:nb.n], make([]uint32, extra)...)
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

// apply applies rw at m to the view and finds the nodes it patched; key
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
	return applied
}

// findChanged lists the changed nodes (see markChanged), once.
func (nb *neighbours) findChanged() {
	if nb.found {
		return
	}
	nb.found = true
	clear(nb.state[:len(nb.view.G.Nodes)])
	nb.downstream = nb.downstream[:0]
	for _, o := range nb.view.G.Outputs {
		if _, ok := nb.markChanged(o); !ok {
			panic("optimizer: a cycle that liveCycle did not find")
		}
	}
}

// markChanged walks the view from value v, operands first, down to the
// nodes before the first patched one, and lists the nodes that changed: the replacement's, the patched ones and those that read a
// changed one. It reports whether v's node changed, and false on a
// cycle, which liveCycle has ruled out.
func (nb *neighbours) markChanged(v rules.Value) (changed, ok bool) {
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
			c, ok := nb.markChanged(a)
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
		nb.downstream = append(nb.downstream, id)
	}
	return changed, true
}

// liveCycle reports whether the view holds a cycle that its outputs
// reach, which makes Apply refuse the rewrite, and sets cyclic where it
// holds only cycles they do not reach (Apply drops those). Most matches
// either make a cycle surelyLiveCycle finds or make none, as mayCycle
// tells, from the patched and replacement nodes alone. Else it walks the
// view: each cycle runs through a patched node, which has a new operand
// (only patched and replacement nodes read replacement nodes), so a walk
// up from each patched node finds whether it reaches a cycle, and it
// stops at g's nodes before the first patched one, as none of them reads
// a patched node. A live patched node that reaches a cycle makes it
// live, and a live cycle holds a live patched node.
func (nb *neighbours) liveCycle() bool {
	last := nb.lastRedirected()
	if nb.surelyLiveCycle(last) {
		return true
	}
	if !nb.mayCycle() {
		return false
	}
	if nb.gen > math.MaxUint32-8 {
		clear(nb.cyc) // older marks would read as this walk's
		clear(nb.stamp)
		nb.gen = 0
	}
	// Marks: walking up from gen, done gen+1, reader walk gen+2. Walking
	// down to the outputs is slower, so the surely live go first.
	nb.gen += 3
	for _, surely := range []bool{true, false} {
		for _, u := range nb.changed[:nb.patched] {
			if nb.surelyLive(u, last) == surely && nb.cyc[u] != nb.gen+1 && nb.reachesItself(u) {
				if surely || nb.liveInView(u, last) {
					return true
				}
				nb.cyclic = true // so far: a live patched node may reach it too
			}
		}
	}
	return false
}

// mayCycle reports whether the view may hold a cycle. Each cycle holds
// a patched node and a new operand (a redirected one's or a replacement
// node's), and between those only nodes of g that read what they read in
// g: so the view has a cycle only where the graph of the patched and
// replacement nodes has one, in which x reads y where x reads y in the
// view, or reads a node of g that g computes from y. That graph is
// small; it may have a cycle the view has not, where g computes a node
// from a patched one only through a redirected value. Walking the view
// to tell took a fifth of densenet121's search.
func (nb *neighbours) mayCycle() bool {
	clear(nb.special)
	for x := range nb.special {
		if nb.special[x] == unvisited && nb.specialCycle(x, false) {
			return true
		}
	}
	return false
}

// surelyLiveCycle reports whether the graph of mayCycle has a cycle that
// a surely live patched node (see surelyLive) reaches, taking only the
// reads of a node of g computed from a patched one that hold in the view
// too (see surelyReads): then so has the view. In densenet121 most
// matches make a cycle (two-output patterns such as (relu ?0) ; (relu ?1)
// on two relus one of which reads the other), and so do inception_v3's.
func (nb *neighbours) surelyLiveCycle(last int) bool {
	nb.special = append(nb.special[:0], make([]uint8, nb.specials())...)
	for x, p := range nb.changed[:nb.patched] {
		if nb.surelyLive(p, last) && nb.special[x] == unvisited && nb.specialCycle(x, true) {
			return true
		}
	}
	return false
}

// specials counts mayCycle's nodes: the patched ones, then the
// replacement's.
func (nb *neighbours) specials() int { return nb.patched + len(nb.view.G.Nodes) - nb.n }

// specialCycle walks the graph of mayCycle up from its x-th node and
// reports whether it meets one it is walking up from; surely leaves out
// the reads surelyReads doubts.
func (nb *neighbours) specialCycle(x int, surely bool) bool {
	nb.special[x] = visiting
	id := nb.n + x - nb.patched
	if x < nb.patched {
		id = nb.changed[x]
	}
	for _, a := range nb.view.G.Nodes[id].Args {
		switch {
		case a.IsInput() || a.Node < nb.first:
			// computed from no patched node
		case a.Node >= nb.n:
			if nb.specialStep(nb.patched+a.Node-nb.n, surely) {
				return true
			}
		default:
			for y, p := range nb.changed[:nb.patched] {
				if a.Node != p && (a.Node < p || !nb.Above(p, a.Node) || surely && !nb.surelyReads(a.Node, p)) {
					continue
				}
				if nb.specialStep(y, surely) {
					return true
				}
			}
		}
	}
	nb.special[x] = visited
	return false
}

// specialStep goes on to mayCycle's y-th node: it reports whether the
// walk has met it already, or meets a cycle from there.
func (nb *neighbours) specialStep(y int, surely bool) bool {
	return nb.special[y] == visiting || nb.special[y] == unvisited && nb.specialCycle(y, surely)
}

// surelyReads reports whether the view computes node x of g from the
// patched node p as g does: some path from p to x in g passes no node
// whose value the rewrite redirects, whose readers read another value in
// the view. Where none lies between p and x, every path does.
func (nb *neighbours) surelyReads(x, p int) bool {
	for _, r := range nb.redirect {
		if v := r[0].Node; (v == x || nb.Above(v, x)) && (v == p || nb.Above(p, v)) {
			return false
		}
	}
	return true
}

// Above reports whether g computes node x from node y: with Live, it
// tells the search's matcher which matches would be cyclic
// (rewrite.Ancestry).
func (nb *neighbours) Above(y, x int) bool {
	return nb.above[x*nb.words+y/64]&(1<<(y%64)) != 0
}

// Live reports whether g's outputs are computed from node x.
func (nb *neighbours) Live(x int) bool { return nb.live[x] }

// fromPatched reports whether value v is a patched node's, or one
// computed from a patched node in g. Before the first patched node, none
// is.
func (nb *neighbours) fromPatched(v rules.Value) bool {
	if v.IsInput() || v.Node < nb.first || v.Node >= nb.n {
		return false
	}
	if nb.inC[v.Node] { // patched: markChanged, which marks the rest, has not run yet
		return true
	}
	return slices.ContainsFunc(nb.changed[:nb.patched], func(p int) bool { return nb.Above(p, v.Node) })
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
// meets a node it is walking up from, or one an earlier walk was walking
// up from when it met one: whether id reaches a cycle. It leaves out the
// nodes of g that are not patched nor computed from one: the view
// computes them as g does, from no new operand, so they reach no cycle.
func (nb *neighbours) reachesItself(id int) bool {
	nb.cyc[id] = nb.gen
	for _, a := range nb.view.G.Nodes[id].Args {
		if a.IsInput() || a.Node < nb.n && !nb.fromPatched(a) {
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

// repeats reports whether an earlier rewrite of g made the same change,
// and remembers this one's. A change is which values of g are redirected
// to what (see signature): the graph after it is g with exactly those
// values replaced, so an equal change gives an equal graph.
func (nb *neighbours) repeated() bool {
	if nb.changes >= rememberAtLeast && nb.repeats*100 < nb.changes {
		return false // an unnoticed repeat is queued again, and dropped when expanded (see search.step)
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
		nb.weightV[id] = nb.weight[id]
	}
	for _, i := range nb.repriced {
		nb.recheck[i] = false
	}
	nb.restoreCounts()
	nb.found, nb.cyclic = false, false
	nb.changed, nb.repriced, nb.inferred, nb.patched = nb.changed[:0], nb.repriced[:0], nb.inferred[:0], 0
	nb.view.G.Nodes = nb.view.G.Nodes[:nb.n]
	nb.view.Shapes = nb.view.Shapes[:nb.n]
}
