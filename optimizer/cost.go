package optimizer

import "rulebook/rules"

// Analytic is a cost model from first principles: each node costs its
// arithmetic at the machine's throughput, the bytes it reads and writes at
// its memory bandwidth, and a fixed launch overhead. It prices the graph
// as lowering writes it and runtimes run it: nodes computed from weights
// alone cost nothing (they are folded), a channel bias added to a
// convolution is part of the Conv, a relu after a convolution or an
// addition is fused into it (fusedRelu), and a broadcast weight is read at
// its stored size.
type Analytic struct {
	FLOPS     float64 // multiply-adds count as 2
	Bandwidth float64 // bytes per second
	Launch    float64 // seconds per node
}

// DefaultCPU roughly matches the CPU runtime on this project's 2-core
// machine: ~300 GFLOPS in GEMMs, ~20 GB/s, a few microseconds a node.
func DefaultCPU() Analytic { return Analytic{FLOPS: 300e9, Bandwidth: 20e9, Launch: 3e-6} }

// Cost is the graph's modelled time in milliseconds.
func (a Analytic) Cost(g *Graph) float64 { return sumPrices(g, a) }

func (a Analytic) price(g *Graph, i, _ int, _ []bool) float64 { return a.node(g, i) * 1e3 }

// pricer is a cost model that prices node by node, in milliseconds; bias
// is the channel bias ewadd fused into node i, or -1.
type pricer interface {
	price(g *Graph, i, bias int, weight []bool) float64
}

// sumPrices is the exact sum of the node prices, rounded once: it does
// not depend on the nodes' order, so that a search can price a neighbour
// by replacing the prices a rewrite changed (see neighbours) and get the
// very number pricing the built neighbour whole gives.
func sumPrices(g *Graph, p pricer) float64 {
	var total exactSum
	g.eachPriced(func(i, bias int, weight []bool) { total.add(p.price(g, i, bias, weight)) })
	return total.round()
}

// OperatorCost is the part of a graph's cost spent in one operator.
type OperatorCost struct {
	Nodes int
	Ms    float64
}

// ByOperator splits the cost model's price of g by operator, so that a
// report can say where the time is and what a rewrite changed: registry
// operators by name ("conv2d+relu" with a fused activation), opaque nodes
// by their ONNX operator. It is nil for a model that does not price node
// by node.
func ByOperator(cost CostModel, g *Graph) map[string]OperatorCost {
	p, ok := cost.(pricer)
	if !ok {
		return nil
	}
	out := map[string]OperatorCost{}
	g.eachPriced(func(i, bias int, weight []bool) {
		op := g.operatorName(i)
		c := out[op]
		c.Nodes++
		c.Ms += p.price(g, i, bias, weight)
		out[op] = c
	})
	return out
}

// operatorName names node i's operator for people.
func (g *Graph) operatorName(i int) string {
	n := &g.G.Nodes[i]
	if o, ok := g.opaqueOf(n); ok {
		return o.node.OpType
	}
	return n.Op.Label(n.Params)
}

// eachPriced calls price with each node that runs at inference as its
// own ONNX node: live, not computed from weights alone (folded), and not
// a channel bias added by its convolution. bias is the ewadd fused into
// node i, or -1.
func (g *Graph) eachPriced(price func(i, bias int, weight []bool)) {
	live, weight := g.liveNodes(), g.weightNodes()
	biasOf := g.convBiases(live, weight, g.uses())
	added := map[int]bool{}
	for _, add := range biasOf {
		added[add] = true
	}
	for i := range g.G.Nodes {
		if !live[i] || weight[i] || added[i] {
			continue
		}
		bias, ok := biasOf[i]
		if !ok {
			bias = -1
		}
		price(i, bias, weight)
	}
}

// node is one node's modelled time in seconds: its work (nodeWork) at
// the machine's bandwidth and throughput, one after the other.
func (a Analytic) node(g *Graph, i int) float64 {
	n := &g.G.Nodes[i]
	if fusedRelu(g, n) {
		return 0
	}
	flops, bytes := nodeWork(g, i)
	return a.Launch + bytes/a.Bandwidth + flops/a.FLOPS
}

func elements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Memory estimates the graph's peak memory during inference, in bytes:
// the weights it reads as stored (folded ones at full size) and the most
// activations alive at once when nodes run in order, each freed after its
// last reader.
func (g *Graph) Memory() int64 {
	live, weight := g.liveNodes(), g.weightNodes()
	last := make([]int, len(g.G.Nodes)) // last reader of each node's outputs
	var weights int64
	read := map[rules.Value]bool{}
	for i, n := range g.G.Nodes {
		if !live[i] || weight[i] {
			continue
		}
		for _, a := range n.Args {
			switch {
			case a.IsInput() && g.Inputs[a.Input()].IsWeight() || !a.IsInput() && weight[a.Node]:
				if !read[a] {
					read[a] = true
					weights += g.storedBytes(a)
				}
			case !a.IsInput():
				last[a.Node] = i
			}
		}
	}
	for _, o := range g.G.Outputs {
		if !o.IsInput() {
			last[o.Node] = len(g.G.Nodes)
		}
	}
	var now, peak int64
	for i := range g.G.Nodes {
		if !live[i] || weight[i] {
			continue
		}
		for _, s := range g.Shapes[i] {
			now += 4 * int64(s.Size())
		}
		peak = max(peak, now)
		for _, a := range g.G.Nodes[i].Args {
			if !a.IsInput() && !weight[a.Node] && last[a.Node] == i {
				last[a.Node] = -1 // freed once
				for _, s := range g.Shapes[a.Node] {
					now -= 4 * int64(s.Size())
				}
			}
		}
	}
	return weights + peak
}

// storedBytes is a weight's size as lowering stores it.
func (g *Graph) storedBytes(v rules.Value) int64 {
	if v.IsInput() {
		return 4 * int64(len(g.Inputs[v.Input()].Stored().Data))
	}
	return 4 * int64(elements(g.shape(v)))
}

// fusedRelu reports whether a relu runs inside the node that computes its
// operand: both our runtime and ONNX Runtime apply a Relu in the output
// pass of the Conv (with its bias) or the Add before it, so that it costs
// nothing of its own; moved after a concat, it costs a pass. The use count
// of the operand is not looked at (a fused Relu needs its operand alone),
// which overstates fusion only where a convolution's output is also read
// elsewhere.
func fusedRelu(g *Graph, n *rules.Node) bool {
	if n.Op.Name != rules.NameRelu || n.Args[0].IsInput() {
		return false
	}
	switch g.G.Nodes[n.Args[0].Node].Op.Name {
	case rules.NameConv2D, rules.NameEwadd:
		return true
	}
	return false
}
