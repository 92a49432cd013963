package enumerate

import (
	"context"
	"fmt"
	"slices"

	"rulebook/fingerprint"
	"rulebook/rules"
)

type valState struct {
	t    *rules.IntTensor
	h    uint64
	sid  int32
	role rules.Role
}

type memoKey struct {
	t    uint16
	a, b uint64 // hashes of the operands
}

type memoVal struct {
	outs   []*rules.IntTensor
	hashes [2]uint64
	sids   [2]int32
}

// memoLimit bounds the per-worker cache of operator results.
const memoLimit = 1 << 15

type shapeKey struct {
	t    uint16
	a, b int32
}

// worker owns the scratch state of one enumeration goroutine.
type worker struct {
	// ctx stops the extension of an item between operator templates: at
	// large degrees one item takes seconds, and Ctrl-C must not wait.
	ctx    context.Context
	g      *generator
	l      *layout
	shapes rules.ShapeTable
	ok     map[shapeKey]bool
	memo   map[memoKey]*memoVal
	// memoUsed is the bytes of tensors the cache holds, kept under
	// generator.memoCap: at large degrees a few thousand results would
	// otherwise fill the memory.
	memoUsed uint64
	vals     [256]valState
	recs     recordChunks

	// the item being extended, for compact records
	item, relabelIdx uint32

	// current graph being extended
	cur       graph
	used      []uint64 // per class bitmask of used copies
	valUse    [256]int // consumers per value
	nodeUse   [MaxOps]int
	groups    map[int32][]uint8
	groupKeys []int32
}

func newWorker(ctx context.Context, g *generator) *worker {
	w := &worker{ctx: ctx, g: g, l: g.l, ok: map[shapeKey]bool{}, groups: map[int32][]uint8{}, memo: map[memoKey]*memoVal{}}
	for i := 0; i < g.l.nIn; i++ {
		role := g.cfg.Pool.Classes[g.l.class[i]].Role
		w.vals[i] = valState{t: g.intIn[i], h: g.inHash[i], sid: w.shapes.Intern(g.intIn[i].Shape), role: role}
	}
	return w
}

// relabelling is one order-preserving renaming of an item's inputs: class
// c's copies 0..k−1 become images[c].
type relabelling struct {
	images [][]int
	holes  int // unused copies below the largest image, to be filled
}

// relabellings lists, in a fixed order, the renamings of item's inputs
// that can still yield a prefix graph once one node (≤ 2 operands) is added.
func (l *layout) relabellings(item graph) []relabelling {
	k := make([]int, len(l.start)) // copies of each class the item uses
	for j := 0; j < int(item.n); j++ {
		nd := item.nodes[j]
		for a := 0; a < l.arity[nd.t]; a++ {
			if v := nd.args[a]; l.isInput(v) {
				k[l.class[v]] = max(k[l.class[v]], l.copyOf[v]+1)
			}
		}
	}
	var out []relabelling
	var rec func(c int, images [][]int, holes int)
	rec = func(c int, images [][]int, holes int) {
		if holes > 2 {
			return
		}
		if c == len(l.start) {
			out = append(out, relabelling{images: slices.Clone(images), holes: holes})
			return
		}
		for _, s := range subsets(l.copies[c], k[c]) {
			h := 0
			if len(s) > 0 {
				h = s[len(s)-1] + 1 - len(s)
			}
			rec(c+1, append(images, s), holes+h)
		}
	}
	rec(0, nil, 0)
	return out
}

// relabel applies a relabelling to an item.
func (l *layout) relabel(item graph, images [][]int) graph {
	g := item
	for j := 0; j < int(g.n); j++ {
		nd := &g.nodes[j]
		for a := 0; a < l.arity[nd.t]; a++ {
			if v := nd.args[a]; l.isInput(v) {
				c := l.class[v]
				nd.args[a] = uint8(l.start[c] + images[c][l.copyOf[v]])
			}
		}
	}
	return g
}

// processItem extends item number idx under each of its relabellings.
func (w *worker) processItem(idx uint32, item graph) error {
	rls := w.l.relabellings(item)
	if len(rls) > maxRelabellings {
		return fmt.Errorf("graph %v has %d input relabellings, more than %d", item, len(rls), maxRelabellings)
	}
	for i, rl := range rls {
		w.item, w.relabelIdx = idx, uint32(i)
		if err := w.extendRelabelled(item, rl.images, rl.holes); err != nil {
			return err
		}
	}
	return nil
}

// subsets lists the increasing k-element subsets of 0..n−1.
func subsets(n, k int) [][]int {
	if k == 0 {
		return [][]int{nil}
	}
	var out [][]int
	var cur []int
	var rec func(from int)
	rec = func(from int) {
		if len(cur) == k {
			out = append(out, slices.Clone(cur))
			return
		}
		for i := from; i < n; i++ {
			cur = append(cur, i)
			rec(i + 1)
			cur = cur[:len(cur)-1]
		}
	}
	rec(0)
	return out
}

func (w *worker) extendRelabelled(item graph, images [][]int, holes int) error {
	l := w.l
	g := l.relabel(item, images)
	w.used = make([]uint64, len(l.start))
	for j := 0; j < int(g.n); j++ {
		nd := g.nodes[j]
		for a := 0; a < l.arity[nd.t]; a++ {
			if v := nd.args[a]; l.isInput(v) {
				w.used[l.class[v]] |= 1 << uint(l.copyOf[v])
			}
		}
	}
	w.cur = g
	if err := w.evaluateCurrent(); err != nil {
		return err
	}
	w.groupValues()
	for t := range l.tmpls {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		w.extendWith(uint16(t), holes)
	}
	return nil
}

func (w *worker) evaluateCurrent() error {
	l := w.l
	g := &w.cur
	clear(w.valUse[:])
	clear(w.nodeUse[:])
	for j := 0; j < int(g.n); j++ {
		nd := g.nodes[j]
		for a := 0; a < l.arity[nd.t]; a++ {
			w.valUse[nd.args[a]]++
			if !l.isInput(nd.args[a]) {
				src, _ := l.nodeOf(nd.args[a])
				w.nodeUse[src]++
			}
		}
		m, err := w.apply(nd.t, nd.args)
		if err != nil {
			return err
		}
		role := w.roleOf(nd.t, nd.args)
		for o, out := range m.outs {
			w.vals[l.valueOf(j, o)] = valState{t: out, h: m.hashes[o], sid: m.sids[o], role: role}
		}
	}
	return nil
}

// groupValues buckets the available values by shape, so each template's
// shape rule runs once per shape pair rather than once per value pair.
func (w *worker) groupValues() {
	l := w.l
	for k := range w.groups {
		w.groups[k] = w.groups[k][:0]
	}
	w.groupKeys = w.groupKeys[:0]
	add := func(v uint8) {
		sid := w.vals[v].sid
		if len(w.groups[sid]) == 0 {
			w.groupKeys = append(w.groupKeys, sid)
		}
		w.groups[sid] = append(w.groups[sid], v)
	}
	for c, s := range l.start {
		// Only copies that can keep the class a prefix are worth offering.
		limit := min(l.copies[c], bitLen(w.used[c])+2)
		for k := 0; k < limit; k++ {
			add(uint8(s + k))
		}
	}
	for j := 0; j < int(w.cur.n); j++ {
		for o := 0; o < l.nOut[w.cur.nodes[j].t]; o++ {
			add(l.valueOf(j, o))
		}
	}
}

func bitLen(m uint64) int {
	n := 0
	for m != 0 {
		n++
		m >>= 1
	}
	return n
}

func (w *worker) shapeOK(t uint16, a, b int32) bool {
	key := shapeKey{t, a, b}
	if ok, hit := w.ok[key]; hit {
		return ok
	}
	tm := w.l.tmpls[t]
	var in []rules.Shape
	switch tm.op.Arity {
	case 0:
		in = []rules.Shape{tm.constShape}
	case 1:
		in = []rules.Shape{w.shapes.Shape(a)}
	default:
		in = []rules.Shape{w.shapes.Shape(a), w.shapes.Shape(b)}
	}
	_, err := tm.op.InferShapes(tm.params, in)
	w.ok[key] = err == nil
	return err == nil
}

func (w *worker) extendWith(t uint16, holes int) {
	l := w.l
	switch l.arity[t] {
	case 0:
		if holes == 0 && w.shapeOK(t, -1, -1) {
			w.attempt(t, [2]uint8{noArg, noArg})
		}
	case 1:
		for _, sa := range w.groupKeys {
			if !w.shapeOK(t, sa, -1) {
				continue
			}
			for _, a := range w.groups[sa] {
				w.attempt(t, [2]uint8{a, noArg})
			}
		}
	case 2:
		for _, sa := range w.groupKeys {
			for _, sb := range w.groupKeys {
				if !w.shapeOK(t, sa, sb) {
					continue
				}
				for _, a := range w.groups[sa] {
					for _, b := range w.groups[sb] {
						w.attempt(t, [2]uint8{a, b})
					}
				}
			}
		}
	}
}

// attempt adds node (t, args) to the current graph and records the result
// if it is new, canonical and (under RepGen) built from representatives.
func (w *worker) attempt(t uint16, args [2]uint8) {
	l := w.l
	g := &w.cur
	ar := l.arity[t]
	if ar == 2 && args[0] == args[1] {
		return // distinct operands, as in TASO
	}
	// Inputs must stay a prefix of each class; roles must fit operands.
	var used [16]uint64
	copy(used[:], w.used)
	op := l.tmpls[t].op
	for a := 0; a < ar; a++ {
		v := args[a]
		role := w.vals[v].role
		if !op.Takes(a, role) {
			return
		}
		if l.isInput(v) {
			used[l.class[v]] |= 1 << uint(l.copyOf[v])
		} else if op.InputOperand(a) || !l.producer(g, v).CanFeed(op) {
			return
		}
	}
	if !l.isPrefix(used[:len(w.used)]) {
		return
	}
	tm := l.tmpls[t]
	for j := 0; j < int(g.n); j++ {
		nd := g.nodes[j]
		if nd.t == t && nd.args == args {
			return // duplicated computation
		}
		if tm.constKey != "" && l.tmpls[nd.t].constKey == tm.constKey {
			return // one constant, one shape per graph
		}
	}
	n := int(g.n)
	if n >= MaxOps {
		return
	}
	next := *g
	next.nodes[n] = node{t: t, args: args}
	next.n++
	var uses [MaxOps]int // uses of each existing node by the new node
	for a := 0; a < ar; a++ {
		if !l.isInput(args[a]) {
			src, _ := l.nodeOf(args[a])
			uses[src]++
		}
	}
	// The new node must be the largest sink: each graph is built in one order.
	for j := 0; j < n; j++ {
		if w.nodeUse[j] == 0 && uses[j] == 0 && l.cmpNode(&next, n, j) <= 0 {
			return
		}
	}
	if !w.g.cfg.Exhaustive && !w.builtFromRepresentatives(&next, uses) {
		return
	}
	m, err := w.apply(t, args)
	if err != nil {
		return
	}
	var hs [2 * MaxOps]uint64
	nh := 0
	for v := l.nIn; v < l.nIn+2*n; v++ {
		j, o := l.nodeOf(uint8(v))
		if o >= l.nOut[g.nodes[j].t] || w.valUse[v] > 0 || args[0] == uint8(v) || (ar == 2 && args[1] == uint8(v)) {
			continue
		}
		hs[nh] = w.vals[v].h
		nh++
	}
	for o := range m.outs {
		hs[nh] = m.hashes[o]
		nh++
	}
	w.recs.add(record{fp: fingerprint.Combine(hs[:nh]), item: w.item,
		code: w.relabelIdx<<24 | uint32(t)<<16 | uint32(args[0])<<8 | uint32(args[1])})
}

// builtFromRepresentatives is the RepGen test: removing any other sink
// whose operands stay visible must leave a class representative, otherwise
// the graph is reachable from a smaller rule and adds nothing.
func (w *worker) builtFromRepresentatives(next *graph, uses [MaxOps]int) bool {
	l := w.l
	n := int(next.n) - 1
	for s := 0; s < n; s++ {
		if w.nodeUse[s] > 0 || uses[s] > 0 {
			continue // not a sink
		}
		if !w.operandsExposed(next, s, uses) {
			continue
		}
		h := l.canonical(l.without(*next, s))
		if _, found := slices.BinarySearchFunc(w.g.prevItems, h, func(a, b graph) int { return cmpGraph(&a, &b) }); !found {
			return false
		}
	}
	return true
}

// operandsExposed reports whether every node that sink s reads is read by
// nothing else, so that removing s leaves those values as outputs.
func (w *worker) operandsExposed(next *graph, s int, uses [MaxOps]int) bool {
	l := w.l
	nd := next.nodes[s]
	var fromS [MaxOps]int
	for a := 0; a < l.arity[nd.t]; a++ {
		if !l.isInput(nd.args[a]) {
			src, _ := l.nodeOf(nd.args[a])
			fromS[src]++
		}
	}
	for j := 0; j < n(next)-1; j++ {
		if fromS[j] > 0 && w.nodeUse[j]+uses[j] != fromS[j] {
			return false
		}
	}
	return true
}

func n(g *graph) int { return int(g.n) }

// apply evaluates template t on the given values, remembering results by
// operand hashes: the same operator on the same tensors recurs in many graphs.
func (w *worker) apply(t uint16, args [2]uint8) (*memoVal, error) {
	l := w.l
	key := memoKey{t: t}
	if l.arity[t] > 0 {
		key.a = w.vals[args[0]].h
	}
	if l.arity[t] > 1 {
		key.b = w.vals[args[1]].h
	}
	if m, ok := w.memo[key]; ok {
		return m, nil
	}
	tm := l.tmpls[t]
	ins := make([]*rules.IntTensor, l.arity[t])
	for a := range ins {
		ins[a] = w.vals[args[a]].t
	}
	outs, err := rules.Eval(tm.op, tm.op.IntKernel, tm.params, ins, tm.constShape)
	if err != nil {
		return nil, err
	}
	m := &memoVal{outs: outs}
	for o, out := range outs {
		m.hashes[o] = fingerprint.Tensor(out)
		m.sids[o] = w.shapes.Intern(out.Shape)
	}
	size := uint64(0)
	for _, out := range outs {
		size += 4 * uint64(len(out.Data))
	}
	if len(w.memo) >= memoLimit || w.memoUsed+size > w.g.memoCap {
		clear(w.memo)
		w.memoUsed = 0
	}
	if size <= w.g.memoCap {
		w.memo[key] = m
		w.memoUsed += size
	}
	return m, nil
}

// roleOf joins the roles of a node's operands; constants are weights.
func (w *worker) roleOf(t uint16, args [2]uint8) rules.Role {
	role := rules.RoleNeutral
	if w.l.arity[t] == 0 {
		return rules.RoleWeight
	}
	for a := 0; a < w.l.arity[t]; a++ {
		role = role.Join(w.vals[args[a]].role)
	}
	return role
}

// producer is the operator that computes node value v.
func (l *layout) producer(g *graph, v uint8) *rules.Op {
	j, _ := l.nodeOf(v)
	return l.tmpls[g.nodes[j].t].op
}
