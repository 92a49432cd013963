package runtime

// A session fuses a Relu into the node that produces its input when that
// node can apply it on the way out (Conv, and the binary operators such as
// a residual Add): the Relu then runs in place, as a view of its input,
// and costs neither a pass over memory nor a dispatch. The model's nodes
// are left as they are, so TimeNode and bench-ops still time each node
// alone.

// reluFuser is a kernel that can return a copy of itself whose outputs
// pass through Relu.
type reluFuser interface {
	withRelu() kernel
}

// reluFusions returns, per node index, whether the node is a Relu fused
// into its producer; producers[j] is that producer's index for fused j.
// A pair qualifies when the producer's output is an intermediate read by
// the Relu alone, and the Relu's output is an intermediate too (a graph
// output lives in memory each Run supplies, not in a planned buffer).
func (m *Model) reluFusions(roles []valueRole) (fused []bool, producers []int) {
	readers := make([]int, len(m.values))
	for _, n := range m.nodes {
		for _, id := range n.in {
			if id >= 0 {
				readers[id]++
			}
		}
	}
	producer := make([]int, len(m.values))
	for i := range producer {
		producer[i] = -1
	}
	for i, n := range m.nodes {
		if _, ok := n.kernel.(reluFuser); ok && len(n.out) == 1 && n.out[0] >= 0 {
			producer[n.out[0]] = i
		}
	}
	fused, producers = make([]bool, len(m.nodes)), make([]int, len(m.nodes))
	for j, n := range m.nodes {
		producers[j] = -1
		if !isRelu(n.kernel) || n.in[0] < 0 || n.out[0] < 0 {
			continue
		}
		in, out := n.in[0], n.out[0]
		if p := producer[in]; p >= 0 && readers[in] == 1 &&
			roles[in] == roleIntermediate && roles[out] == roleIntermediate {
			fused[j], producers[j] = true, p
		}
	}
	return fused, producers
}

func isRelu(k kernel) bool {
	u, ok := k.(unaryKernel)
	return ok && u.op == unaryRelu
}

// reluInPlace applies Relu to x in place.
func reluInPlace(x []float32) {
	for i, v := range x {
		x[i] = max(v, 0)
	}
}
