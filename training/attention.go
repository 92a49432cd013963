package training

import (
	"maps"
	"slices"
)

// Attention is one scaled dot-product attention found in the graph: a
// product of two activations (Q·Kᵀ), optionally scaled by a number and
// offset by a mask, a softmax over its last axis, optionally a dropout,
// and a product of the probabilities by V. Heads counts the attention's
// independent problems per sample (the scores' dimension 1 when they have
// rank 4); Batch·Heads problems of SeqQ × SeqK scores over HeadDim
// features each.
type Attention struct {
	Batch, Heads, SeqQ, SeqK, HeadDim int64
	// Ops are the group's operators in graph order, the scores' product
	// first and the product by V last.
	Ops []int
	// Q, K (as the scores' product reads it), V, the mask ("" if none) and
	// the output.
	Q, K, V, Mask, Out string
}

// Attentions lists the attention groups found in the graph, as written
// (FuseAttention prices them as fused kernels).
func (g *Graph) Attentions() []*Attention { return g.attention }

// Fused reports whether the graph's attention groups are priced as fused
// kernels (FuseAttention).
func (g *Graph) Fused() bool { return g.fused }

// findAttention records every attention group around a Softmax.
func (g *Graph) findAttention() {
	for i, op := range g.Ops {
		if op.Type == "Softmax" {
			if a := g.attentionAt(i); a != nil {
				g.attention = append(g.attention, a)
			}
		}
	}
}

// attentionAt matches the attention around Softmax s, or returns nil.
// Every value between the two products must have one reader, so that
// nothing outside the group needs the scores.
func (g *Graph) attentionAt(s int) *Attention {
	scores := g.ValueShape(g.Ops[s].Inputs[0])
	if r := len(scores); r < 2 || !slices.Equal(g.Ops[s].Reduces, []int{r - 1}) {
		return nil
	}
	a := &Attention{Ops: []int{s}}
	qk, ok := g.scoresProduct(a, g.Ops[s].Inputs[0])
	if !ok || !g.activations(qk) || !g.single(qk) || !g.single(s) {
		return nil
	}
	a.Ops = append(a.Ops, qk)
	// forward from the softmax: a dropout, then the product by V
	probs := s
	pv, ok := g.only(s)
	if ok && g.Ops[pv].Type == "Dropout" && g.single(pv) {
		a.Ops = append(a.Ops, pv)
		probs = pv
		pv, ok = g.only(pv)
	}
	if !ok || g.Ops[pv].Type != "MatMul" || !g.activations(pv) || g.producerOf(g.Ops[pv].Inputs[0]) != probs {
		return nil
	}
	a.Ops = append(a.Ops, pv)
	slices.Sort(a.Ops)
	a.Q, a.K, a.V, a.Out = g.Ops[qk].Inputs[0], g.Ops[qk].Inputs[1], g.Ops[pv].Inputs[1], g.Ops[pv].Outputs[0]
	return g.attentionShape(a, scores)
}

// scoresProduct walks back from the softmax's input v through a scale by
// a number and a mask Add (each at most once) to the scores' product,
// adding what it passes to a.
func (g *Graph) scoresProduct(a *Attention, v string) (int, bool) {
	scaled := false
	for {
		p, ok := g.Producer(v)
		if !ok {
			return 0, false
		}
		op := g.Ops[p]
		if op.Type == "MatMul" {
			return p, true
		}
		switch {
		case !g.single(p):
			return 0, false
		case !scaled && g.scaling(p, "Div", "Mul"):
			scaled, v = true, op.Inputs[0]
		case a.Mask == "" && op.Type == "Add" && len(op.Inputs) == 2:
			v, a.Mask = op.Inputs[0], op.Inputs[1]
			if q, made := g.Producer(v); !made || !slices.Contains([]string{"MatMul", "Div", "Mul"}, g.Ops[q].Type) {
				v, a.Mask = a.Mask, v
			}
		default:
			return 0, false
		}
		a.Ops = append(a.Ops, p)
	}
}

// attentionShape reads the problem's sizes from the scores and Q.
func (g *Graph) attentionShape(a *Attention, scores []int64) *Attention {
	q := g.ValueShape(a.Q)
	r := len(scores)
	if len(q) != r {
		return nil
	}
	a.SeqQ, a.SeqK, a.HeadDim = scores[r-2], scores[r-1], q[r-1]
	a.Batch, a.Heads = 1, 1
	switch {
	case r >= 4:
		a.Batch, a.Heads = scores[0], scores[1]
		for _, d := range scores[2 : r-2] {
			a.Heads *= d
		}
	case r == 3 && g.Batch > 0 && scores[0]%g.Batch == 0:
		a.Batch, a.Heads = g.Batch, scores[0]/g.Batch
	case r == 3:
		a.Batch = scores[0]
	}
	return a
}

// producerOf is the operator writing v, or −1.
func (g *Graph) producerOf(v string) int {
	if i, ok := g.Producer(v); ok {
		return i
	}
	return -1
}

// activations reports whether op i's first two inputs are both data (a
// product of activations, not by a weight).
func (g *Graph) activations(i int) bool {
	op := g.Ops[i]
	return len(op.Inputs) == 2 && op.ParamBytes == 0 && op.Product == nil && g.isData(op.Inputs[0]) && g.isData(op.Inputs[1])
}

// isData reports whether v flows from a graph input: the input itself or
// an operator's output that is not a constant.
func (g *Graph) isData(v string) bool {
	_, made := g.Producer(v)
	return g.inputs[v] || (made && !g.constant[v])
}

// single reports whether op i's output has one reader.
func (g *Graph) single(i int) bool { _, ok := g.only(i); return ok }

// FuseAttention is the graph with every attention group priced as one
// fused kernel (FlashAttention, PyTorch's scaled_dot_product_attention):
// the group's first operator (the scores' product) carries the kernel's
// work and saved tensors, the others none, and each member points to its
// group. The kernel keeps Q, K, V, the output and a log-sum-exp per row
// for backward, never the SeqQ × SeqK scores, and its backward recomputes
// the scores. The graph itself is unchanged.
func (g *Graph) FuseAttention() *Graph {
	if g.fused || len(g.attention) == 0 {
		return g
	}
	f := *g
	f.fused = true
	f.Ops = slices.Clone(g.Ops)
	f.storage = maps.Clone(g.storage)
	for _, a := range g.attention {
		f.mergeHeads(a)
		fwd, bwd := f.fusedWork(a)
		for _, i := range a.Ops {
			f.Ops[i].Attention = a
			f.Ops[i].Forward, f.Ops[i].Backward, f.Ops[i].Saved = Work{}, Work{}, nil
		}
		lead := &f.Ops[a.Ops[0]]
		lead.Forward, lead.Backward = fwd, bwd
		for _, v := range []string{a.Q, a.K, a.V, a.Out} {
			lead.Saved = append(lead.Saved, Saved{Value: v, Bytes: g.ValueBytes(v)})
		}
		if a.Mask != "" && g.isData(a.Mask) {
			lead.Saved = append(lead.Saved, Saved{Value: a.Mask, Bytes: g.ValueBytes(a.Mask)})
		}
		lead.Saved = append(lead.Saved, Saved{Bytes: a.lseBytes()})
	}
	f.countSaved()
	return &f
}

// mergeHeads makes the heads' merge after a fused kernel a view: the
// kernel writes its output [B, H, S, D] with the heads inner, as
// FlashAttention and PyTorch's kernels do, so the Transpose to
// [B, S, H, D] and the Reshape to [B, S, H·D] after it copy nothing.
func (g *Graph) mergeHeads(a *Attention) {
	t, ok := g.only(g.producerOf(a.Out))
	if !ok || g.Ops[t].Type != "Transpose" || !slices.Equal(g.Ops[t].Perm, []int{0, 2, 1, 3}) {
		return
	}
	g.storage[g.Ops[t].Outputs[0]] = a.Out
	if r, ok := g.only(t); ok && (g.Ops[r].Type == "Reshape" || g.Ops[r].Type == "Flatten") {
		g.storage[g.Ops[r].Outputs[0]] = a.Out
	}
}

// lseBytes is the log-sum-exp the kernel keeps per query row.
func (a *Attention) lseBytes() float64 { return 4 * float64(a.Batch*a.Heads*a.SeqQ) }

// fusedWork is the fused kernel's work. Forward: the group's FLOPs, but
// bytes only for Q, K, V, the mask and the output (the scores stay on
// chip). Backward: the group's backward FLOPs plus the scores recomputed,
// reading Q, K, V, the output, its gradient and the log-sum-exp and
// writing the gradients of Q, K and V.
func (g *Graph) fusedWork(a *Attention) (fwd, bwd Work) {
	for _, i := range a.Ops {
		fwd.FLOPs += g.Ops[i].Forward.FLOPs
		bwd.FLOPs += g.Ops[i].Backward.FLOPs
	}
	bwd.FLOPs += g.Ops[a.Ops[0]].Forward.FLOPs
	qkv := g.ValueBytes(a.Q) + g.ValueBytes(a.K) + g.ValueBytes(a.V)
	out := g.ValueBytes(a.Out)
	mask := 0.0
	if a.Mask != "" {
		mask = g.ValueBytes(a.Mask)
	}
	fwd.Bytes = qkv + mask + out + a.lseBytes()
	bwd.Bytes = 2*qkv + mask + 2*out + a.lseBytes()
	return fwd, bwd
}
