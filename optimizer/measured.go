package optimizer

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/runtime"
	"rulebook/timing"
)

// CostModel prices a graph in milliseconds.
type CostModel interface {
	Cost(g *Graph) float64
}

// OpKey names one operator configuration as the runtime and the store's
// op_costs table do: the ONNX operator, its shapes and its cost-relevant
// attributes.
type OpKey struct {
	Operator, Shapes, Params string
}

func opKey(n runtime.NodeInfo) OpKey {
	return OpKey{Operator: n.Op, Shapes: n.ShapeKey(), Params: n.Params}
}

// Measured prices each node by the runtime's measured time of the ONNX
// nodes it lowers to, on the CPU or, with Backend runtime.BackendCUDA, on
// the GPU (each node's kernels timed with CUDA events). Known supplies stored measurements; a configuration
// it lacks is timed on demand and handed to Record, so that the next
// search finds it. Graph costs are sums of per-node times: the runtime
// runs nodes one after another.
type Measured struct {
	Known  func(OpKey) (ms float64, ok bool)
	Record func(OpKey, float64)
	// Repeat is the number of timed runs per configuration (median).
	Repeat  int
	Threads int
	// Backend is what the nodes are timed on: runtime.BackendCPU (or "")
	// or runtime.BackendCUDA.
	Backend string
	Ctx     context.Context

	cache    map[string]float64 // by node signature
	gpu      *runtime.GPU       // with Backend cuda, opened on first use
	measured int
	err      error
}

// Measurements is the number of configurations timed on demand so far.
func (m *Measured) Measurements() int { return m.measured }

// Err is the first failure to measure a node; such nodes cost what the
// backend's analytic model (DefaultCPU or H200) says, so the search goes on, but the result is suspect.
func (m *Measured) Err() error { return m.err }

// Cost is the graph's measured time in milliseconds.
func (m *Measured) Cost(g *Graph) float64 { return sumPrices(g, m) }

// price is one node's time, with the channel bias ewadd fused into it, if
// any (bias ≥ 0).
func (m *Measured) price(g *Graph, i, bias int, weight []bool) float64 {
	if m.cache == nil {
		m.cache = map[string]float64{}
	}
	sig := g.signature(i, bias, weight)
	if ms, ok := m.cache[sig]; ok {
		return ms
	}
	ms, err := m.time(g, i, bias, weight)
	if err != nil {
		if m.err == nil {
			m.err = fmt.Errorf("measure %s: %w", sig, err)
		}
		ms = m.analytic().price(g, i, bias, weight)
	}
	m.cache[sig] = ms
	return ms
}

// signature identifies what a node costs: its operator, parameters,
// operand shapes and which operands are weights, stored how (opaque nodes
// by their ONNX node), and a fused bias.
func (g *Graph) signature(i, bias int, weight []bool) string {
	n := &g.G.Nodes[i]
	var b strings.Builder
	b.WriteString(n.Op.Name)
	if o, ok := g.opaqueOf(n); ok {
		b.WriteString(" " + o.node.Name)
	}
	for _, p := range n.Params {
		b.WriteString(" " + strconv.Itoa(p))
	}
	for _, a := range n.Args {
		b.WriteString(" ")
		for _, d := range g.shape(a) {
			b.WriteString(strconv.Itoa(d) + "x")
		}
		switch {
		case a.IsInput() && g.Inputs[a.Input()].Compact != nil:
			b.WriteString("c" + fmt.Sprint(g.Inputs[a.Input()].Compact.Shape))
		case a.IsInput() && g.Inputs[a.Input()].IsWeight() || !a.IsInput() && weight[a.Node]:
			b.WriteString("w")
		}
	}
	if bias >= 0 {
		b.WriteString(" +bias")
	}
	return b.String()
}

// time lowers node i (and its fused bias) to a model of its own, loads it
// with the runtime and sums the known or measured times of its nodes.
func (m *Measured) time(g *Graph, i, bias int, weight []bool) (float64, error) {
	rt, s, err := m.open(g, i, bias, weight)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	ctx := m.context()
	total := 0.0
	for _, n := range rt.Nodes() {
		key := opKey(n)
		if ms, ok := m.Known(key); ok {
			total += ms
			continue
		}
		d, err := s.TimeNode(ctx, n.Index, max(m.Repeat, 1))
		if err != nil {
			return 0, err
		}
		ms := timing.Milliseconds(d)
		m.measured++
		if m.Record != nil {
			m.Record(key, ms)
		}
		total += ms
	}
	return total, nil
}

// analytic is the model that prices what cannot be timed.
func (m *Measured) analytic() pricer {
	if m.Backend == runtime.BackendCUDA {
		return H200()
	}
	return DefaultCPU()
}

// open loads node i's lowered model with the runtime and opens it on the
// backend; the caller closes the executor.
func (m *Measured) open(g *Graph, i, bias int, weight []bool) (*runtime.Model, runtime.Executor, error) {
	model, err := g.nodeModel(i, bias, weight)
	if err != nil {
		return nil, nil, err
	}
	rt, _, err := runtime.FromONNX(model, "", runtime.LoadOptions{Weights: runtime.WeightsFile})
	if err != nil {
		return nil, nil, err
	}
	s, err := m.session(rt)
	return rt, s, err
}

// session opens rt on the backend: on the CPU, or on the GPU, which
// Measured opens once and keeps for every node it times (Close gives it
// back), so that kernels, library handles and cuDNN's algorithm choices
// are not made again for each.
func (m *Measured) session(rt *runtime.Model) (runtime.Executor, error) {
	if m.Backend != runtime.BackendCUDA {
		return rt.Open(cmp.Or(m.Backend, runtime.BackendCPU), m.Threads)
	}
	if m.gpu == nil {
		gpu, err := runtime.OpenGPU()
		if err != nil {
			return nil, err
		}
		m.gpu = gpu
	}
	return m.gpu.Open(rt, runtime.CUDAOptions{})
}

// Close gives back the GPU the measurements opened, if they did; the
// sessions on it are closed by then.
func (m *Measured) Close() error {
	if m.gpu == nil {
		return nil
	}
	err := m.gpu.Close()
	m.gpu = nil
	return err
}

func (m *Measured) context() context.Context {
	if m.Ctx == nil {
		return context.Background()
	}
	return m.Ctx
}

// Confirm times afresh the operator configurations in which graphs a and
// b differ, in rounds that take each configuration in turn, and returns
// the time of a's and of b's, in milliseconds (each configuration's
// median over the rounds, times how many more of it the graph has). The
// search compares graphs priced minutes apart, or from the store, on a
// machine whose load drifts; a gain that does not hold when both sides
// are timed together is noise. The fresh times replace the stored ones.
func (m *Measured) Confirm(ctx context.Context, a, b *Graph, rounds int) (aMs, bMs float64, err error) {
	differ, err := m.differences(a, b)
	defer closeRivals(differ)
	if err != nil {
		return 0, 0, err
	}
	if err := timeRounds(ctx, differ, max(rounds, 1)); err != nil {
		return 0, 0, err
	}
	for _, c := range differ {
		ms := m.keep(c)
		if c.count > 0 {
			aMs += float64(c.count) * ms
		} else {
			bMs -= float64(c.count) * ms
		}
	}
	return aMs, bMs, nil
}

// rival is an operator configuration that one of two graphs has more of
// (count > 0: the first), loaded to be timed again.
type rival struct {
	sig   string
	count int
	load  func() (*runtime.Model, runtime.Executor, error)
	rt    *runtime.Model
	s     runtime.Executor
	times [][]time.Duration // by round, by runtime node
}

// differences loads the configurations that a and b do not share; those
// loaded are returned with an error too, to be closed.
func (m *Measured) differences(a, b *Graph) ([]*rival, error) {
	bySig := map[string]*rival{}
	var all []*rival
	collect := func(g *Graph, sign int) {
		g.eachPriced(func(i, bias int, weight []bool) {
			sig := g.signature(i, bias, weight)
			c := bySig[sig]
			if c == nil {
				c = &rival{sig: sig, load: func() (*runtime.Model, runtime.Executor, error) { return m.open(g, i, bias, weight) }}
				bySig[sig] = c
				all = append(all, c)
			}
			c.count += sign
		})
	}
	collect(a, 1)
	collect(b, -1)
	var differ []*rival
	for _, c := range all {
		if c.count == 0 {
			continue
		}
		var err error
		if c.rt, c.s, err = c.load(); err != nil {
			return differ, fmt.Errorf("load %s: %w", c.sig, err)
		}
		differ = append(differ, c)
	}
	return differ, nil
}

// closeRivals releases what the rivals' executors hold on their device.
func closeRivals(differ []*rival) {
	for _, c := range differ {
		c.s.Close()
	}
}

// timeRounds times every rival once a round, in alternating order, so that
// neither graph's configurations always run first.
func timeRounds(ctx context.Context, differ []*rival, rounds int) error {
	return timing.Alternate(ctx, rounds, len(differ), func(i int) error {
		c := differ[i]
		var times []time.Duration
		for _, n := range c.rt.Nodes() {
			d, err := c.s.TimeNode(ctx, n.Index, 1)
			if err != nil {
				return fmt.Errorf("time %s: %w", c.sig, err)
			}
			times = append(times, d)
		}
		c.times = append(c.times, times)
		return nil
	})
}

// keep stores a rival's fresh medians, per runtime node for the store and
// in all for the search's cache, and returns the latter in milliseconds.
func (m *Measured) keep(c *rival) float64 {
	total := 0.0
	for k, n := range c.rt.Nodes() {
		ts := make([]time.Duration, len(c.times))
		for r := range c.times {
			ts[r] = c.times[r][k]
		}
		ms := timing.Milliseconds(timing.Median(ts))
		if m.Record != nil {
			m.Record(opKey(n), ms)
		}
		total += ms
	}
	if m.cache != nil {
		m.cache[c.sig] = total
	}
	return total
}

// nodeModel is an ONNX model of node i alone, as lowering writes it:
// activations become model inputs, weights (folded ones as zeros of their
// shape) initializers.
func (g *Graph) nodeModel(i, bias int, weight []bool) (*onnx.Model, error) {
	l := newLowering(g, nil, weight)
	shapes := map[string][]int{}
	args := g.G.Nodes[i].Args
	if bias >= 0 {
		args = append(append([]rules.Value(nil), args...), g.G.Nodes[bias].Args...)
	}
	for _, a := range args {
		if !a.IsInput() && weight[a.Node] {
			l.folded[a] = g.placeholder(a, weight)
		}
		if _, isWeight := l.weightValue(a); !isWeight {
			shapes[l.name(a, full)] = g.shape(a)
		}
	}
	at := i
	if bias >= 0 {
		l.fusedBias[bias], at = i, bias
	}
	nodes, err := l.node(at)
	if err != nil {
		return nil, err
	}
	out := &onnx.Graph{Name: "node", Nodes: nodes}
	for _, n := range nodes {
		for _, in := range n.Inputs {
			if _, ok := l.inits[in]; ok || shapes[in] == nil {
				continue
			}
			out.Inputs = append(out.Inputs, valueInfo(in, shapes[in]))
			shapes[in] = nil // once
		}
	}
	for k, s := range g.Shapes[at] {
		out.Outputs = append(out.Outputs, valueInfo(l.name(rules.Value{Node: at, Out: k}, full), s.DimList()))
	}
	l.initializers(out)
	return &onnx.Model{IRVersion: g.model.IRVersion, OpsetImports: g.model.OpsetImports, Graph: out}, nil
}

// placeholder stands for a weight-only value that is not folded yet: zeros
// of its shape, compact when it is a channel bias.
func (g *Graph) placeholder(v rules.Value, weight []bool) Value {
	shape := g.shape(v)
	name := g.foldName(v)
	if g.channelBias(v, weight) {
		return Value{Name: name, Shape: shape, Compact: runtime.NewTensor(shape[1], 1, 1)}
	}
	return Value{Name: name, Shape: shape, Data: runtime.NewTensor(shape...)}
}

func valueInfo(name string, shape []int) *onnx.ValueInfo {
	dims := make([]onnx.Dim, len(shape))
	for i, d := range shape {
		dims[i] = onnx.Dim{Value: int64(d), HasValue: true}
	}
	return &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: dims}
}
