package optimizer

import "rulebook/rules"

// Analytic is a cost model from first principles: each node costs its
// arithmetic at the machine's throughput, the bytes it reads and writes at
// its memory bandwidth, and a fixed launch overhead. Nodes computed from
// weights alone cost nothing: they are folded before inference.
type Analytic struct {
	FLOPS     float64 // multiply-adds count as 2
	Bandwidth float64 // bytes per second
	Launch    float64 // seconds per node
}

// DefaultCPU roughly matches the CPU runtime on this project's 2-core
// machine: ~300 GFLOPS in GEMMs, ~20 GB/s, a few microseconds a node.
var DefaultCPU = Analytic{FLOPS: 300e9, Bandwidth: 20e9, Launch: 3e-6}

// Cost is the graph's modelled time in milliseconds.
func (a Analytic) Cost(g *Graph) float64 {
	live := g.liveNodes()
	weight := g.weightNodes()
	total := 0.0
	for i := range g.G.Nodes {
		if live[i] && !weight[i] {
			total += a.node(g, i)
		}
	}
	return total * 1e3
}

// node is one node's modelled time in seconds.
func (a Analytic) node(g *Graph, i int) float64 {
	n := &g.G.Nodes[i]
	bytes := 0
	for _, arg := range n.Args {
		bytes += 4 * elements(g.shape(arg))
	}
	out := 0
	for _, s := range g.Shapes[i] {
		out += elements(s.DimList())
	}
	bytes += 4 * out
	return a.Launch + float64(bytes)/a.Bandwidth + flops(g, n, out)/a.FLOPS
}

// flops counts a node's arithmetic; data movement (concat, split,
// transpose) and opaque nodes count one operation an output element.
func flops(g *Graph, n *rules.Node, out int) float64 {
	switch n.Op.Name {
	case "conv2d":
		w := g.shape(n.Args[1])
		return 2 * float64(out) * float64(w[1]*w[2]*w[3])
	case "matmul":
		x := g.shape(n.Args[0])
		return 2 * float64(out) * float64(x[len(x)-1])
	case "pool_avg", "pool_max":
		k := n.Params[0]
		return float64(out * k * k)
	}
	return float64(out)
}

func elements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// weightNodes marks the nodes computed from weights alone.
func (g *Graph) weightNodes() []bool {
	weight := make([]bool, len(g.G.Nodes))
	for i, n := range g.G.Nodes {
		if _, opaque := g.opaqueOf(&n); opaque {
			continue
		}
		weight[i] = true
		for _, a := range n.Args {
			if a.IsInput() && !g.Inputs[a.Input()].IsWeight() || !a.IsInput() && !weight[a.Node] {
				weight[i] = false
			}
		}
	}
	return weight
}
