package plan

import (
	"math"
	"slices"

	"rulebook/cluster"
	"rulebook/profile"
	"rulebook/runtime"
	"rulebook/training"
)

// Source names what priced an operator: an exact profile match, a fit
// through the profile's points of its class, or the roofline where the
// profile has nothing for it.
type Source string

// The three sources, as plan.json and --explain write them.
const (
	FromProfile  Source = "profile"
	FromFit      Source = "fit"
	FromRoofline Source = "roofline"
)

// OpCost is one operator's simulated time on one device for one
// micro-batch, in seconds, and what priced it. Forward and Backward are
// the device's time; Launch and BackwardLaunch are the host's time to
// issue them, which overlaps the device's work on earlier operators (the
// profile's launch floor per kernel; 0 under the roofline). Cast and
// CastLaunch are autocast's copy of the weights into 16 bits, made once a
// step, before the first micro-batch's forward (autocast keeps the copy
// for the step). An operator that moves nothing (a Reshape) has no
// source.
type OpCost struct {
	Forward        float64 `json:"forward_s"`
	Backward       float64 `json:"backward_s"`
	Launch         float64 `json:"launch_s,omitempty"`
	BackwardLaunch float64 `json:"backward_launch_s,omitempty"`
	Cast           float64 `json:"cast_s,omitempty"`
	CastLaunch     float64 `json:"cast_launch_s,omitempty"`
	Source         Source  `json:"source,omitempty"`
}

// costs prices operators on one device in one precision, from a
// measured profile where it has points and the roofline elsewhere.
type costs struct {
	dev  cluster.Device
	prec cluster.Precision
	// elem is the bytes of one activation element in prec.
	elem float64
	// curves are the profile's points per operator kind in prec (fp32 for
	// the optimizer, whose state is fp32 in every precision); rows pools
	// every element-wise and row-wise kind, the curve of an operator
	// bound by memory traffic.
	curves map[profile.Kind]*curve
	rows   *curve
	exact  func(profile.Kind, profile.Shape) (profile.Entry, bool)
	// launch is the profile's launch floor in prec: each measured time
	// is the host's launch and the device's work in turn, where in a
	// step the host runs ahead of the device.
	launch float64
}

// newCosts reads the profile's points for prec; prof may be nil.
func newCosts(d cluster.Device, prec cluster.Precision, prof *profile.Profile) *costs {
	c := &costs{dev: d, prec: prec, elem: prec.ActivationBytes(), curves: map[profile.Kind]*curve{}}
	if prof == nil {
		return c
	}
	c.exact = func(k profile.Kind, s profile.Shape) (profile.Entry, bool) { return prof.Find(k, s, prec) }
	floor, call := launchCosts(prof.Entries, prec)
	c.launch = floor
	var pooled []profile.Entry
	for _, k := range []profile.Kind{profile.Linear, profile.Conv2D, profile.AttentionFused, profile.AttentionUnfused,
		profile.LayerNorm, profile.GELU, profile.ReLU, profile.Softmax, profile.Add} {
		es := prof.Of(k, prec)
		if rowKinds[k] {
			pooled = append(pooled, es...)
		}
		c.curves[k] = newCurve(es, k, floor, call)
	}
	c.rows = newCurve(pooled, profile.Add, floor, call)
	fl32, call32 := launchCosts(prof.Entries, cluster.FP32)
	for _, k := range []profile.Kind{profile.AdamFused, profile.AdamForeach} {
		c.curves[k] = newCurve(prof.Of(k, cluster.FP32), k, fl32, call32)
	}
	return c
}

// rowKinds are the element-wise and row-wise kinds, pooled into the curve
// of an operator the profile has no kind for.
var rowKinds = map[profile.Kind]bool{profile.LayerNorm: true, profile.GELU: true, profile.ReLU: true, profile.Softmax: true, profile.Add: true}

// launchCosts reads two fixed costs from a profile's precision. floor is
// its fastest forward: the least an operator's launch costs. call is the
// fixed cost of the separate backward() call the profile times each
// backward with, which a training step pays once and not per operator:
// the fastest backward less the launch floor.
func launchCosts(es []profile.Entry, prec cluster.Precision) (floor, call float64) {
	fwd, bwd := math.Inf(1), math.Inf(1)
	for _, e := range es {
		if e.Precision != prec {
			continue
		}
		fwd = min(fwd, e.Forward())
		if e.BackwardMS > 0 {
			bwd = min(bwd, e.Backward())
		}
	}
	if math.IsInf(fwd, 1) {
		return 0, 0
	}
	if math.IsInf(bwd, 1) {
		return fwd, 0
	}
	return fwd, max(0, bwd-fwd)
}

// curve is a fit through one operator class's measured points: time
// against size (FLOPs for products, bytes for memory-bound operators,
// parameters for the optimizer), interpolated in log-log between
// neighbouring points, at the end points' achieved rate beyond them, and
// never under the launch floor.
type curve struct {
	x, fwd, bwd []float64
	floor, call float64
}

// newCurve sorts the entries by size; entries of one size (shapes of equal
// FLOPs) are merged at their geometric mean. It is nil without points.
func newCurve(es []profile.Entry, k profile.Kind, floor, call float64) *curve {
	type pt struct{ x, f, b float64 }
	var pts []pt
	for _, e := range es {
		if x := entrySize(e, k); x > 0 {
			pts = append(pts, pt{x, e.Forward(), max(e.Backward()-call, floor)})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	slices.SortFunc(pts, func(a, b pt) int { return cmpFloat(a.x, b.x) })
	c := &curve{floor: floor, call: call}
	for i := 0; i < len(pts); {
		j, lf, lb := i, 0.0, 0.0
		for ; j < len(pts) && pts[j].x == pts[i].x; j++ {
			lf += math.Log(pts[j].f)
			lb += math.Log(pts[j].b)
		}
		n := float64(j - i)
		c.x, c.fwd, c.bwd = append(c.x, pts[i].x), append(c.fwd, math.Exp(lf/n)), append(c.bwd, math.Exp(lb/n))
		i = j
	}
	return c
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// entrySize is an entry's size on its curve: FLOPs for products and
// attention, bytes for memory-bound operators, parameters for Adam.
func entrySize(e profile.Entry, k profile.Kind) float64 {
	switch k {
	case profile.Linear, profile.Conv2D, profile.AttentionFused, profile.AttentionUnfused:
		return e.GFLOP * 1e9
	case profile.AdamFused, profile.AdamForeach:
		return float64(e.Shape.Dims[0])
	}
	return e.MB * 1e6
}

// at is the curve's forward and backward time at size x.
func (c *curve) at(x float64) (fwd, bwd float64) {
	if x <= 0 {
		return 0, 0
	}
	return max(c.floor, interpolate(c.x, c.fwd, x)), max(c.floor, interpolate(c.x, c.bwd, x))
}

// interpolate is y at x, log-log between the neighbouring points, and
// proportional to x (the end point's rate) beyond the ends.
func interpolate(xs, ys []float64, x float64) float64 {
	n := len(xs)
	switch {
	case x <= xs[0]:
		return ys[0] * x / xs[0]
	case x >= xs[n-1]:
		return ys[n-1] * x / xs[n-1]
	}
	i, _ := slices.BinarySearch(xs, x)
	t := math.Log(x/xs[i-1]) / math.Log(xs[i]/xs[i-1])
	return math.Exp(math.Log(ys[i-1]) + t*math.Log(ys[i]/ys[i-1]))
}

// opKind is the profile's operator class for an ONNX operator: products
// with a weight are linear layers or convolutions, products of two
// activations are priced on the linear curve by their FLOPs, and
// everything else that moves data on its own kind's curve or the pooled
// memory-bound one.
func opKind(op training.Op) profile.Kind {
	switch {
	case op.Product != nil && !op.Product.Linear:
		return profile.Conv2D
	case op.Class.Kernel == profile.Conv2D:
		// a convolution without a weight product is priced as moving data
		return ""
	}
	return op.Class.Kernel
}

// isProduct says whether op runs on tensor cores in a reduced precision.
func isProduct(op training.Op) bool {
	return op.Product != nil || op.Class.TensorCores
}

// piece is one device's part of one operator for one micro-batch: share
// of the batch's rows, cut of the features (tensor parallelism).
type piece struct {
	share, cut float64
	style      Style
}

// work is the piece's forward and backward work. Activations scale with
// the micro-batch and the cut; weights are read whole (their cut) by
// every micro-batch, so a small micro-batch pays for them again.
func (p piece) work(op training.Op) (fwd, bwd training.Work) {
	w := op.ParamBytes * p.cut
	act := func(x training.Work, weightReads float64) training.Work {
		return training.Work{FLOPs: x.FLOPs * p.share * p.cut, Bytes: max(0, x.Bytes-weightReads*op.ParamBytes)*p.share*p.cut + weightReads*w}
	}
	if op.Lookup {
		// a lookup reads only the rows it gathers (training counts them);
		// its backward writes a dense gradient the size of its table (or
		// of its cut), as nn.Embedding's does, zeroed first
		rows := func(x training.Work) training.Work {
			return training.Work{FLOPs: x.FLOPs * p.share * p.cut, Bytes: x.Bytes * p.share * p.cut}
		}
		fwd, bwd = rows(op.Forward), rows(op.Backward)
		bwd.Bytes += w
		return fwd, bwd
	}
	return act(op.Forward, 1), act(op.Backward, 2)
}

// op prices one operator's piece.
func (c *costs) op(g *training.Graph, op training.Op, p piece) OpCost {
	fwd, bwd := p.work(op)
	if fwd.FLOPs == 0 && fwd.Bytes == 0 {
		return OpCost{}
	}
	out := c.measured(g, op, p, fwd, bwd)
	return c.finish(out, c.roofline(op, fwd), c.roofline(op, bwd), c.castBytes(op, p), backwardRatio(fwd, bwd))
}

// backwardRatio is how many times the forward's work the backward does.
func backwardRatio(fwd, bwd training.Work) float64 {
	r := 1.0
	if fwd.FLOPs > 0 {
		r = max(r, bwd.FLOPs/fwd.FLOPs)
	}
	if fwd.Bytes > 0 {
		r = max(r, bwd.Bytes/fwd.Bytes)
	}
	return r
}

// finish splits a measured time into the host's launch and the device's
// rest, never less than the roofline (rf, rb), and adds autocast's weight
// copies; an operator the profile says nothing of gets the roofline.
//
// A small operator's measured backward is mostly the fixed costs of the
// separate backward() call the profile times it with, which the launch
// floor and the call's estimate (launchCosts) take out only in part. The
// backward's device time is therefore held to ratio times the forward's:
// it does ratio times the forward's work (the larger of the FLOPs and
// bytes ratios: two products of the forward's size for a product, a read
// of the gradient besides the input for an element-wise operator).
func (c *costs) finish(out OpCost, rf, rb, cast, ratio float64) OpCost {
	launch := c.launch
	if out.Source == "" {
		out, launch = OpCost{Forward: rf, Backward: rb, Source: FromRoofline}, 0
	} else {
		fwd := max(out.Forward-launch, rf)
		out.Forward, out.Backward = fwd, max(min(out.Backward-launch, ratio*fwd), rb)
		out.Launch, out.BackwardLaunch = launch, launch
	}
	if cast > 0 {
		t := cast / c.dev.MemoryBandwidth
		if c.rows != nil && launch > 0 {
			f, _ := c.rows.at(cast)
			t = max(f-launch, t)
		}
		out.Cast, out.CastLaunch = t, launch
		out.Backward += t
		out.BackwardLaunch += launch
	}
	return out
}

// measured prices from the profile: an exact match, else the class's
// curve (products no faster than their bytes at the measured bandwidth);
// no source where the profile has neither.
func (c *costs) measured(g *training.Graph, op training.Op, p piece, fwd, bwd training.Work) OpCost {
	k := opKind(op)
	if c.exact != nil {
		if s, ok := exactShape(g, op, k, p); ok {
			if e, ok := c.exact(k, s); ok {
				cv := c.curves[k]
				return OpCost{Forward: e.Forward(), Backward: max(e.Backward()-cv.call, cv.floor), Source: FromProfile}
			}
		}
	}
	bytes := fwd.Bytes * c.elem / 4
	cv := c.curves[k]
	switch {
	case isProduct(op) && cv != nil:
		f, b := cv.at(fwd.FLOPs)
		if c.rows != nil {
			// a skinny product reads its weights at the memory's pace
			rf, rb := c.rows.at(bytes)
			f, b = max(f, rf), max(b, rb)
		}
		return OpCost{Forward: f, Backward: b, Source: FromFit}
	case isProduct(op):
		return OpCost{}
	case cv == nil:
		cv = c.rows
	}
	if cv == nil {
		return OpCost{}
	}
	f, b := cv.at(bytes)
	return OpCost{Forward: f, Backward: b, Source: FromFit}
}

// roofline is the larger of the work's FLOPs at the precision's peak
// (products on tensor cores; other operators at the plain peak) and its
// bytes, in the precision's element size, at memory bandwidth.
func (c *costs) roofline(op training.Op, w training.Work) float64 {
	peak := c.dev.PeakFLOPS
	if isProduct(op) && c.dev.Has(c.prec) {
		peak = c.dev.Peak(c.prec)
	}
	elem := c.elem
	if op.Lookup {
		// autocast leaves embeddings in fp32: the table, its rows and
		// its gradient
		elem = 4
	}
	return max(w.FLOPs/peak, w.Bytes*elem/4/c.dev.MemoryBandwidth)
}

// castBytes is autocast's copy of a product's fp32 weights into 16 bits
// (read 4, write 2 bytes a parameter), once a step, and of each
// micro-batch's 16-bit weight gradient back into the fp32 one in its
// backward: the same traffic again, one more kernel each.
func (c *costs) castBytes(op training.Op, p piece) float64 {
	if c.elem >= 4 || op.Product == nil || op.ParamBytes == 0 {
		return 0
	}
	return 1.5 * op.ParamBytes * p.cut
}

// adam prices the optimizer step over params fp32 parameters: Adam as
// the profile measured the implementation asked for, else the roofline
// of its traffic (weights, gradients and two moments read, three
// written: 28 bytes a parameter).
func (c *costs) adam(params float64, impl Optimizer) (float64, Source) {
	if params <= 0 {
		return 0, ""
	}
	k := profile.AdamFused
	if impl == ForeachAdam {
		k = profile.AdamForeach
	}
	if cv := c.curves[k]; cv != nil {
		f, _ := cv.at(params)
		return f, FromFit
	}
	return max(10*params/c.dev.PeakFLOPS, 28*params/c.dev.MemoryBandwidth), FromRoofline
}

// exactShape is the profile shape of the operator's piece, where the
// piece has whole rows.
func exactShape(g *training.Graph, op training.Op, k profile.Kind, p piece) (profile.Shape, bool) {
	switch k {
	case profile.Linear:
		pr := op.Product
		if pr == nil || !pr.Linear {
			return profile.Shape{}, false
		}
		tokens, ok := whole(float64(pr.M) * p.share)
		in, out := float64(pr.K), float64(pr.N)
		if p.style == Rowwise {
			in *= p.cut
		} else {
			out *= p.cut
		}
		ki, ok1 := whole(in)
		ko, ok2 := whole(out)
		return profile.LinearShape(tokens, ki, ko), ok && ok1 && ok2
	case profile.Conv2D:
		return convShape(g, op, p)
	case profile.LayerNorm, profile.GELU, profile.ReLU, profile.Softmax, profile.Add:
		return rowsShape(g, op.Outputs[0], k, p)
	}
	return profile.Shape{}, false
}

// convShape is a convolution's input and weight at the piece's batch, its
// stride read from the input and output heights.
func convShape(g *training.Graph, op training.Op, p piece) (profile.Shape, bool) {
	x, w, y := g.ValueShape(op.Inputs[0]), g.ValueShape(op.Inputs[1]), g.ValueShape(op.Outputs[0])
	if len(x) != 4 || len(w) != 4 || len(y) != 4 || y[2] == 0 || p.cut != 1 {
		return profile.Shape{}, false
	}
	n, ok := whole(float64(x[0]) * p.share)
	stride := int64(math.Round(float64(x[2]) / float64(y[2])))
	return profile.ConvShape([4]int64{n, x[1], x[2], x[3]}, [4]int64{w[0], w[1], w[2], w[3]}, max(stride, 1)), ok
}

// whole is x as a positive integer, if it is one.
func whole(x float64) (int64, bool) {
	r := math.Round(x)
	return int64(r), r >= 1 && math.Abs(x-r) < 1e-6*max(1, r)
}

// group is operators PyTorch runs as one kernel (a GELU as torch.onnx
// writes it; an attention), priced as one at its first operator.
type group struct {
	kind profile.Kind
	ops  []int
	x    string // a GELU's input
	att  *training.Attention
}

// groups finds the graph's kernels of several operators, by operator. An
// attention fused by the graph (training.Graph.FuseAttention) already
// carries its work on its first operator; one kept as written is priced
// from the profile's unfused attention where it has that, else operator
// by operator.
func (c *costs) groups(g *training.Graph) map[int]*group {
	out := map[int]*group{}
	add := func(gr *group) {
		for _, i := range gr.ops {
			out[i] = gr
		}
	}
	for i, op := range g.Ops {
		if ops, x, ok := g.GELU(i); ok {
			add(&group{kind: profile.GELU, ops: ops, x: x})
		}
		if a := op.Attention; a != nil && a.Ops[0] == i {
			add(&group{kind: profile.AttentionFused, ops: a.Ops, att: a})
		}
	}
	if !g.Fused() && c.curves[profile.AttentionUnfused] != nil {
		for _, a := range g.Attentions() {
			add(&group{kind: profile.AttentionUnfused, ops: a.Ops, att: a})
		}
	}
	return out
}

// all prices every operator's piece, each kernel of several operators at
// its first (the others cost nothing).
func (c *costs) all(g *training.Graph, layouts []OpLayout, tp int, share float64) []OpCost {
	groups := c.groups(g)
	out := make([]OpCost, len(g.Ops))
	for i, op := range g.Ops {
		l := layouts[i]
		if l.Fused {
			continue
		}
		p := piece{share: share, cut: l.cut(tp), style: l.Style}
		gr := groups[i]
		switch {
		case gr == nil && biasEpilogue(g, op):
			// addmm adds the bias as the product writes its output; the
			// bias's gradient (a sum over rows) is a kernel of its own
			t := c.op(g, op, p)
			out[i] = OpCost{Backward: t.Backward, BackwardLaunch: t.BackwardLaunch, Source: t.Source}
		case gr == nil:
			out[i] = c.op(g, op, p)
		case gr.ops[0] == i:
			out[i] = c.group(g, gr, p)
		}
	}
	return out
}

// biasEpilogue reports whether op adds a bias to a weight product's only
// output, as torch.onnx writes nn.Linear on more than two dimensions
// (MatMul, then Add): PyTorch runs it as one addmm.
func biasEpilogue(g *training.Graph, op training.Op) bool {
	if !op.Class.BiasAdd || op.ParamBytes == 0 || len(op.Inputs) != 2 {
		return false
	}
	for _, v := range op.Inputs {
		if p, ok := g.Producer(v); ok && g.Ops[p].Product != nil && g.Ops[p].Product.Linear && len(g.Consumers(v)) == 1 {
			return true
		}
	}
	return false
}

// group prices a kernel of several operators: from the profile's entry
// or curve for its kind, else its roofline.
func (c *costs) group(g *training.Graph, gr *group, p piece) OpCost {
	var fwd, bwd training.Work
	for _, i := range gr.ops {
		f, b := p.work(g.Ops[i])
		fwd.FLOPs, bwd.FLOPs = fwd.FLOPs+f.FLOPs, bwd.FLOPs+b.FLOPs
		fwd.Bytes, bwd.Bytes = fwd.Bytes+f.Bytes, bwd.Bytes+b.Bytes
	}
	var shape profile.Shape
	ok := false
	size := fwd.FLOPs
	switch gr.kind {
	case profile.GELU:
		// one pass: read x, write the output
		last := g.Ops[gr.ops[len(gr.ops)-1]].Outputs[0]
		fwd.Bytes = (g.ValueBytes(gr.x) + g.ValueBytes(last)) * p.share * p.cut
		bwd.Bytes = 3 * fwd.Bytes / 2
		size = fwd.Bytes * c.elem / 4
		shape, ok = rowsShape(g, last, profile.GELU, p)
	default:
		shape, ok = attentionShape(gr.kind, gr.att, p)
	}
	rf := max(fwd.FLOPs/c.dev.PeakFLOPS, fwd.Bytes*c.elem/4/c.dev.MemoryBandwidth)
	rb := max(bwd.FLOPs/c.dev.PeakFLOPS, bwd.Bytes*c.elem/4/c.dev.MemoryBandwidth)
	if gr.att != nil && c.dev.Has(c.prec) {
		rf, rb = max(fwd.FLOPs/c.dev.Peak(c.prec), fwd.Bytes*c.elem/4/c.dev.MemoryBandwidth), max(bwd.FLOPs/c.dev.Peak(c.prec), bwd.Bytes*c.elem/4/c.dev.MemoryBandwidth)
	}
	var out OpCost
	cv := c.curves[gr.kind]
	if e, found := c.find(gr.kind, shape, ok); found {
		out = OpCost{Forward: e.Forward(), Backward: max(e.Backward()-cv.call, cv.floor), Source: FromProfile}
	} else if cv != nil {
		f, b := cv.at(size)
		out = OpCost{Forward: f, Backward: b, Source: FromFit}
	}
	return c.finish(out, rf, rb, 0, backwardRatio(fwd, bwd))
}

// find is the profile's entry for an exact shape, if ok and measured.
func (c *costs) find(k profile.Kind, s profile.Shape, ok bool) (profile.Entry, bool) {
	if !ok || c.exact == nil {
		return profile.Entry{}, false
	}
	return c.exact(k, s)
}

// attentionShape is an attention's piece as the profile spells it: the
// micro-batch's samples, the device's heads, square scores.
func attentionShape(k profile.Kind, a *training.Attention, p piece) (profile.Shape, bool) {
	b, ok1 := whole(float64(a.Batch) * p.share)
	h, ok2 := whole(float64(a.Heads) * p.cut)
	return profile.AttentionShape(k, b, h, a.SeqQ, a.HeadDim), ok1 && ok2 && a.SeqQ == a.SeqK
}

// rowsShape is value v's piece as rows × features, where the piece has
// whole rows and all the features.
func rowsShape(g *training.Graph, v string, k profile.Kind, p piece) (profile.Shape, bool) {
	s := g.ValueShape(v)
	if len(s) == 0 || p.cut != 1 || s[len(s)-1] < 1 {
		return profile.Shape{}, false
	}
	feats := s[len(s)-1]
	rows, ok := whole(float64(runtime.Elements(s)/feats) * p.share)
	return profile.RowsShape(k, rows, feats), ok
}
