// Package rewrite applies rules to graphs. Find locates one side of a rule
// in a graph, Apply replaces it by the other side, and Derive searches for
// short rewrite sequences between two graphs. Pruning, comparison with
// foreign rule sets and the optimizer all rewrite through it.
// docs/optimizer.md tells how the optimizer's search uses it.
package rewrite

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/zeebo/xxh3"

	"rulebook/rules"
)

// Match embeds a pattern graph in a host graph.
type Match struct {
	// Nodes maps each pattern node to a distinct host node.
	Nodes []int
	// Inputs maps each pattern input to the host value it stands for;
	// Bound[i] is false for inputs the pattern does not read.
	Inputs []rules.Value
	Bound  []bool
}

// Find calls yield for each embedding of pattern in host, until yield
// returns false. A node matches a node with the same operator and
// parameters; pattern inputs match any host value, two of them possibly the
// same one. Matching is on terms, not on nodes: two pattern nodes that
// compute the same term may match one host node, and matched values that
// are also used elsewhere stay computed after Apply. Patterns without
// nodes, or with an input as an output, match nowhere.
func Find(pattern, host *rules.Graph, yield func(*Match) bool) {
	find(pattern, host, indexHost(host), false, skipCycles{}, yield)
}

// FindCommutative is Find where the operands of commutative operators
// (rules.Op.Commutative) match in either order, so that a search needs no
// commutation rewrites.
func FindCommutative(pattern, host *rules.Graph, yield func(*Match) bool) {
	find(pattern, host, indexHost(host), true, skipCycles{}, yield)
}

// hostIndex lists a host graph's nodes by operator and parameters, and
// each node's users, so that matching a pattern node looks only at nodes
// that can match it: the users of the node its first operand matched, or
// else the nodes of its operator and parameters.
type hostIndex struct {
	byOp map[string][]int
	// kinds numbers the host's combinations of operator and parameters
	// (see kindKey); kind is each node's, byKind the nodes of each.
	kinds  map[string]int
	kind   []int
	byKind [][]int
	users  [][]int // of each node, ascending, each user once
}

// kindKey appends what a node must share with a pattern node to match it:
// its operator's name, a zero byte that no name holds, its parameters.
func kindKey(b []byte, n *rules.Node) []byte {
	b = append(b, n.Op.Name...)
	b = append(b, 0)
	for _, p := range n.Params {
		b = binary.LittleEndian.AppendUint64(b, uint64(p))
	}
	return b
}

func indexHost(g *rules.Graph) *hostIndex {
	idx := &hostIndex{byOp: map[string][]int{}, kinds: map[string]int{}, kind: make([]int, len(g.Nodes)), users: make([][]int, len(g.Nodes))}
	var key []byte
	for i, n := range g.Nodes {
		idx.byOp[n.Op.Name] = append(idx.byOp[n.Op.Name], i)
		key = kindKey(key[:0], &g.Nodes[i])
		k, ok := idx.kinds[string(key)]
		if !ok {
			k = len(idx.byKind)
			idx.kinds[string(key)] = k
			idx.byKind = append(idx.byKind, nil)
		}
		idx.kind[i] = k
		idx.byKind[k] = append(idx.byKind[k], i)
		for _, a := range n.Args {
			if a.IsInput() {
				continue
			}
			if u := idx.users[a.Node]; len(u) == 0 || u[len(u)-1] != i {
				idx.users[a.Node] = append(u, i)
			}
		}
	}
	return idx
}

// find yields pattern's embeddings in host (see Find), but those skip
// finds cyclic.
func find(pattern, host *rules.Graph, idx *hostIndex, commutative bool, skip skipCycles, yield func(*Match) bool) {
	if len(pattern.Nodes) == 0 || slices.ContainsFunc(pattern.Outputs, rules.Value.IsInput) {
		return
	}
	k := len(pattern.Nodes)
	f := &finder{pattern: pattern, host: host, idx: idx, commutative: commutative,
		m:    &Match{Nodes: make([]int, k), Inputs: make([]rules.Value, pattern.NumInputs), Bound: make([]bool, pattern.NumInputs)},
		kind: make([]int, k), set: make([]bool, k), swap: make([]bool, k), skipCycles: skip}
	var key []byte
	for i := range pattern.Nodes {
		key = kindKey(key[:0], &pattern.Nodes[i])
		kind, ok := idx.kinds[string(key)]
		if !ok {
			return // no host node has this operator with these parameters
		}
		f.kind[i] = kind
	}
	f.plan()
	f.search(0)
	f.found.yield(f.m, yield)
}

// finder searches for a pattern's embeddings. It matches the pattern's
// nodes in the order plan picks, which starts where the host has fewest
// candidates and goes on to the operands of the nodes matched, each then
// known: matched operands first, (ewadd (concat ?a ?b) (concat ?c ?d))
// tried every pair of a densenet's hundreds of concats. It yields the
// embeddings in the order of matching the pattern's nodes first to last
// (see found), which callers rely on for reproducible searches.
type finder struct {
	pattern, host *rules.Graph
	idx           *hostIndex
	// kind is each pattern node's kind in the host index, looked up
	// once: deeper pattern nodes are matched once per partial match.
	kind []int
	// order is the pattern's nodes in the order they are matched.
	order []int
	m     *Match
	// set says which pattern nodes m.Nodes holds a host node for: those
	// matched and the operands of those matched; swap says which were
	// matched with their operands swapped.
	set, swap   []bool
	commutative bool
	swapped     []rules.Value // scratch: a host node's operands swapped
	// bound and assigned list the pattern inputs bound and the operand
	// nodes set so far, in that order, so that backtracking unbinds them
	// without allocating a list a try.
	bound, assigned []int
	found           found
	skipCycles      // the matches to skip (see cyclic)
}

// plan orders the pattern's nodes for matching: first the one whose
// kind the host has fewest of, then, while there are any, an operand of
// a node ordered already (its host node is then known), else a reader
// of one (among that node's readers), else the rarest left.
func (f *finder) plan() {
	k := len(f.pattern.Nodes)
	in, known := make([]bool, k), make([]bool, k)
	f.order = make([]int, 0, k)
	for len(f.order) < k {
		next := -1
		for p := range k {
			if !in[p] && known[p] {
				next = p
				break
			}
		}
		for p := 0; next < 0 && p < k; p++ {
			if !in[p] && slices.ContainsFunc(f.pattern.Nodes[p].Args, func(a rules.Value) bool { return !a.IsInput() && in[a.Node] }) {
				next = p
			}
		}
		for p := k - 1; next < 0 && p >= 0; p-- {
			if !in[p] && (next < 0 || len(f.idx.byKind[f.kind[p]]) < len(f.idx.byKind[f.kind[next]])) {
				next = p
			}
		}
		in[next] = true
		for _, a := range f.pattern.Nodes[next].Args {
			if !a.IsInput() {
				known[a.Node] = true
			}
		}
		f.order = append(f.order, next)
	}
}

// candidates are the host nodes pattern node p, not yet set, may match:
// the readers of the node one of its operands matched, or else the nodes
// of its operator and parameters.
func (f *finder) candidates(p int) []int {
	for _, a := range f.pattern.Nodes[p].Args {
		if !a.IsInput() && f.set[a.Node] {
			return f.idx.users[f.m.Nodes[a.Node]]
		}
	}
	return f.idx.byKind[f.kind[p]]
}

// search matches the s-th pattern node of the plan, and the rest after
// it, recording each embedding found.
func (f *finder) search(s int) {
	if s == len(f.order) {
		if !f.cyclic() {
			f.found.add(f.m, f.swap)
		}
		return
	}
	p := f.order[s]
	if f.set[p] {
		f.tryNode(s, p, f.m.Nodes[p]) // an operand of a node matched
		return
	}
	for _, h := range f.candidates(p) {
		f.m.Nodes[p], f.set[p] = h, true
		f.tryNode(s, p, h)
	}
	f.set[p] = false
}

// tryNode matches pattern node p, the s-th of the plan, to host node h,
// with h's operands in order and, if it commutes, swapped.
func (f *finder) tryNode(s, p, h int) {
	if f.idx.kind[h] != f.kind[p] {
		return
	}
	hn := &f.host.Nodes[h]
	f.try(s, p, hn.Args, false)
	if f.commutative && hn.Op.Commutative && hn.Args[0] != hn.Args[1] {
		f.swapped = append(f.swapped[:0], hn.Args[1], hn.Args[0])
		f.try(s, p, f.swapped, true) // bindArgs reads it before deeper levels reuse it
	}
}

// try matches pattern node p to a host node whose operands, in the order
// tried, are args, and goes on with the next node of the plan.
func (f *finder) try(s, p int, args []rules.Value, swapped bool) {
	bound, assigned := len(f.bound), len(f.assigned)
	if f.bindArgs(&f.pattern.Nodes[p], args) {
		f.swap[p] = swapped
		f.search(s + 1)
	}
	for _, in := range f.bound[bound:] {
		f.m.Bound[in] = false
	}
	for _, q := range f.assigned[assigned:] {
		f.set[q] = false
	}
	f.bound, f.assigned = f.bound[:bound], f.assigned[:assigned]
}

// bindArgs checks a candidate host node's operands against the pattern
// node's, binding pattern inputs and setting operand nodes seen for the
// first time and listing them, so that the caller can undo them.
func (f *finder) bindArgs(pn *rules.Node, args []rules.Value) bool {
	for j, a := range pn.Args {
		hv := args[j]
		if !a.IsInput() {
			switch {
			case f.set[a.Node]:
				if hv != (rules.Value{Node: f.m.Nodes[a.Node], Out: a.Out}) {
					return false
				}
			case hv.IsInput() || hv.Out != a.Out:
				return false
			default:
				f.m.Nodes[a.Node], f.set[a.Node] = hv.Node, true
				f.assigned = append(f.assigned, a.Node)
			}
			continue
		}
		in := a.Input()
		if f.m.Bound[in] {
			if f.m.Inputs[in] != hv {
				return false
			}
			continue
		}
		f.m.Inputs[in], f.m.Bound[in] = hv, true
		f.bound = append(f.bound, in)
	}
	return true
}

// found records a pattern's embeddings as they are found, to yield them
// in the order of their pattern nodes' host nodes, the first node's
// first, each with operands in order before swapped: the order of
// matching the pattern's nodes first to last, host nodes in ascending
// order.
type found struct {
	nodes  []int
	swaps  []bool
	inputs []rules.Value
	bound  []bool // which inputs are bound, the same for every embedding
}

func (fd *found) add(m *Match, swap []bool) {
	fd.nodes = append(fd.nodes, m.Nodes...)
	fd.swaps = append(fd.swaps, swap...)
	fd.inputs = append(fd.inputs, m.Inputs...)
	if fd.bound == nil {
		fd.bound = slices.Clone(m.Bound)
	}
}

// yield sorts the embeddings and yields them in m, until yield returns
// false.
func (fd *found) yield(m *Match, yield func(*Match) bool) {
	k, in := len(m.Nodes), len(m.Inputs)
	if len(fd.nodes) == 0 {
		return
	}
	order := make([]int, len(fd.nodes)/k)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		for p := range k {
			if c := cmp.Compare(fd.nodes[a*k+p], fd.nodes[b*k+p]); c != 0 {
				return c
			}
			if sa, sb := fd.swaps[a*k+p], fd.swaps[b*k+p]; sa != sb {
				if sa {
					return 1
				}
				return -1
			}
		}
		return 0
	})
	copy(m.Bound, fd.bound)
	for _, e := range order {
		copy(m.Nodes, fd.nodes[e*k:(e+1)*k])
		copy(m.Inputs, fd.inputs[e*in:(e+1)*in])
		if !yield(m) {
			return
		}
	}
}

// ErrCycle reports a replacement that would make the graph cyclic: a value
// the replacement reads depends on a value it replaces.
var ErrCycle = errors.New("the replacement would make the graph cyclic")

// Apply returns a copy of host in which the embedding m of pattern is
// replaced by replacement, whose outputs take the place of the pattern's,
// position by position, wherever they are used. Nodes nothing uses any
// more are dropped; matched nodes still used elsewhere stay.
func Apply(host, pattern, replacement *rules.Graph, m *Match) (*rules.Graph, error) {
	if len(pattern.Outputs) != len(replacement.Outputs) {
		return nil, fmt.Errorf("pattern has %d outputs, replacement %d", len(pattern.Outputs), len(replacement.Outputs))
	}
	// Nodes are numbered temporarily: host nodes keep their index,
	// replacement node j becomes len(host.Nodes)+j.
	base := len(host.Nodes)
	newValue := func(v rules.Value) (rules.Value, error) {
		if !v.IsInput() {
			return rules.Value{Node: base + v.Node, Out: v.Out}, nil
		}
		if !m.Bound[v.Input()] {
			return rules.Value{}, fmt.Errorf("the replacement reads input %d, which the pattern does not", v.Input())
		}
		return m.Inputs[v.Input()], nil
	}
	redirect := map[rules.Value]rules.Value{}
	for k, o := range pattern.Outputs {
		nv, err := newValue(replacement.Outputs[k])
		if err != nil {
			return nil, err
		}
		redirect[rules.Value{Node: m.Nodes[o.Node], Out: o.Out}] = nv
	}
	follow := func(v rules.Value) rules.Value {
		if nv, ok := redirect[v]; ok {
			return nv
		}
		return v
	}
	nodes := make([]rules.Node, base+len(replacement.Nodes))
	// One backing array for every node's operands: Apply runs for every
	// neighbour of every graph a search visits.
	total := 0
	for _, n := range host.Nodes {
		total += len(n.Args)
	}
	for _, n := range replacement.Nodes {
		total += len(n.Args)
	}
	buf := make([]rules.Value, total)
	take := func(k int) []rules.Value {
		args := buf[:k:k]
		buf = buf[k:]
		return args
	}
	for i, n := range host.Nodes {
		args := take(len(n.Args))
		for j, a := range n.Args {
			args[j] = follow(a)
		}
		n.Args = args
		nodes[i] = n
	}
	for j, n := range replacement.Nodes {
		args := take(len(n.Args))
		for k, a := range n.Args {
			v, err := newValue(a)
			if err != nil {
				return nil, err
			}
			args[k] = v
		}
		n.Args = args
		nodes[base+j] = n
	}
	outputs := make([]rules.Value, len(host.Outputs))
	for i, o := range host.Outputs {
		outputs[i] = follow(o)
	}
	return assemble(host.NumInputs, nodes, outputs)
}

// assemble builds a graph from temporarily numbered nodes, whose operand
// slices it may change: it keeps the nodes the outputs depend on, in a
// topological order that follows the temporary numbering where it can.
func assemble(numInputs int, nodes []rules.Node, outputs []rules.Value) (*rules.Graph, error) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]uint8, len(nodes))
	index := make([]int, len(nodes))
	g := &rules.Graph{NumInputs: numInputs}
	var visit func(id int) error
	visit = func(id int) error {
		switch state[id] {
		case visiting:
			return ErrCycle
		case done:
			return nil
		}
		state[id] = visiting
		n := nodes[id]
		for _, a := range n.Args {
			if !a.IsInput() {
				if err := visit(a.Node); err != nil {
					return err
				}
			}
		}
		state[id] = done
		// The operand slices are Apply's own copies: renumber in place.
		for j, a := range n.Args {
			if !a.IsInput() {
				n.Args[j].Node = index[a.Node]
			}
		}
		index[id] = len(g.Nodes)
		g.Nodes = append(g.Nodes, n)
		return nil
	}
	for _, o := range outputs {
		if !o.IsInput() {
			if err := visit(o.Node); err != nil {
				return nil, err
			}
		}
	}
	for _, o := range outputs {
		if !o.IsInput() {
			o.Node = index[o.Node]
		}
		g.Outputs = append(g.Outputs, o)
	}
	return g, nil
}

// Term renders what a graph computes from its inputs as terms, one per
// output: readable, but as long as the graph unfolded into trees, which for
// deep graphs with shared values is exponential. Key is the compact form.
func Term(g *rules.Graph) string {
	memo := make([]string, len(g.Nodes))
	var term func(v rules.Value) string
	term = func(v rules.Value) string {
		if v.IsInput() {
			return "?" + strconv.Itoa(v.Input())
		}
		if memo[v.Node] == "" {
			n := &g.Nodes[v.Node]
			var b strings.Builder
			b.WriteString("(" + n.Op.Name)
			for _, p := range n.Params {
				b.WriteString(" " + strconv.Itoa(p))
			}
			for _, a := range n.Args {
				b.WriteString(" " + term(a))
			}
			b.WriteString(")")
			memo[v.Node] = b.String()
		}
		if g.Nodes[v.Node].Op.Outputs > 1 {
			return memo[v.Node] + "#" + strconv.Itoa(v.Out)
		}
		return memo[v.Node]
	}
	parts := make([]string, len(g.Outputs))
	for i, o := range g.Outputs {
		parts[i] = term(o)
	}
	return strings.Join(parts, " ; ")
}

// Key identifies what a graph computes from its inputs: two graphs have the
// same key exactly when their outputs are the same expressions of the same
// inputs, whatever their node order or sharing (up to 128-bit hash
// collisions). Each node's hash covers its operator, parameters and
// operands, so the key costs one pass over the nodes. Keys are for
// comparing graphs within a run; they are not stored.
func Key(g *rules.Graph) string { return key(g, false) }

// CommutativeKey is Key up to the order of commutative operators'
// operands: graphs that differ only by commuting them share it.
func CommutativeKey(g *rules.Graph) string { return key(g, true) }

func key(g *rules.Graph, commutative bool) string {
	h := Hasher{Commutative: commutative}
	return h.Key(g.Outputs, h.Nodes(g, nil))
}

// Hash is a node's hash: its operator, parameters and operands.
type Hash = xxh3.Uint128

// valueBytes is the size of an operand in a node's hashed bytes.
const valueBytes = 24

// Hasher computes the node hashes that Key (or, Commutative, CommutativeKey)
// combines, node by node, so that a caller that knows which nodes a
// rewrite changed rehashes only those and the nodes that read them. Its
// zero value hashes as Key does; it reuses one buffer, so one goroutine
// uses it at a time.
type Hasher struct {
	Commutative bool
	buf         []byte
}

// Nodes hashes every node of g into hashes (reused when long enough).
func (h *Hasher) Nodes(g *rules.Graph, hashes []Hash) []Hash {
	hashes = slices.Grow(hashes[:0], len(g.Nodes))[:len(g.Nodes)]
	for i := range g.Nodes {
		hashes[i] = h.Node(&g.Nodes[i], hashes)
	}
	return hashes
}

// Node hashes n, whose operands are graph inputs or nodes hashed in
// hashes, by index. Operands enter as they are (a node's hash and the
// output's position, or an input's index), so that a node costs one
// hash however many operands it has.
func (h *Hasher) Node(n *rules.Node, hashes []Hash) Hash {
	buf := append(h.buf[:0], n.Op.Name...)
	for _, p := range n.Params {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(p))
	}
	operands := len(buf)
	for _, a := range n.Args {
		buf = appendValue(buf, a, hashes)
	}
	if h.Commutative && n.Op.Commutative && string(buf[operands:operands+valueBytes]) > string(buf[operands+valueBytes:]) {
		swapOperands(buf[operands:])
	}
	h.buf = buf
	return xxh3.Hash128(buf)
}

// Key is the key of a graph with these outputs whose nodes hash to hashes.
func (h *Hasher) Key(outputs []rules.Value, hashes []Hash) string {
	out := make([]byte, 0, valueBytes*len(outputs))
	for _, o := range outputs {
		out = appendValue(out, o, hashes)
	}
	return string(out)
}

// AppendValue appends the bytes that stand for value v in a node's hash:
// an input by its index, a node's output by hashes[v.Node] and the
// output's position.
func (h *Hasher) AppendValue(b []byte, v rules.Value, hashes []Hash) []byte {
	return appendValue(b, v, hashes)
}

// inputTag marks an input among the operands' bytes, where a node's
// output has its node's hash: a hash word of all ones is as likely as any
// other collision.
const inputTag = ^uint64(0)

// appendValue appends a value's bytes: an input by its index, a node's
// output by the node's hash and the output's position.
func appendValue(b []byte, v rules.Value, hashes []Hash) []byte {
	if v.IsInput() {
		b = binary.LittleEndian.AppendUint64(b, inputTag)
		b = binary.LittleEndian.AppendUint64(b, inputTag)
		return binary.LittleEndian.AppendUint64(b, uint64(v.Input()))
	}
	h := hashes[v.Node]
	b = binary.LittleEndian.AppendUint64(b, h.Hi)
	b = binary.LittleEndian.AppendUint64(b, h.Lo)
	return binary.LittleEndian.AppendUint64(b, uint64(v.Out)+1)
}

// swapOperands swaps the two operands' bytes at the start of b.
func swapOperands(b []byte) {
	var tmp [valueBytes]byte
	copy(tmp[:], b[:valueBytes])
	copy(b[:valueBytes], b[valueBytes:2*valueBytes])
	copy(b[valueBytes:2*valueBytes], tmp[:])
}
