package rules

// FlexFlow's reading of Unity's operators (docs/parallel.md, "FlexFlow
// under its own reading"). FlexFlow's rule file names a dimension for
// replicate and reduce (PM_PARALLEL_DIM 0, 1 or 2), which our operators,
// with one replica dimension, have no use for. Read as its generator's
// values, replicate concatenates copies along that dimension and reduce
// adds its equal slices: FlexFlow's Replicate multiplies the dimension's
// size and degree, its Reduction divides them. These operators model that
// reading, so that FlexFlow's rules can be judged under it as well as under
// ours. They belong to no set that generates, proves or releases rules:
// FlexFlowReading is their only registry.

// SetFlexFlow names the operators of FlexFlow's reading.
const SetFlexFlow = "flexflow"

// FlexFlowReading is the operator set FlexFlow's rules are read in under
// its own model: our partition, combine and the companions of the parallel
// set, with FlexFlow's replicate, reduce and linear in place of ours.
func FlexFlowReading() *Registry {
	var ops []*Op
	for _, op := range Parallel().Ops() {
		switch op.Name {
		case "replicate", "reduce", "linear":
		default:
			ops = append(ops, op)
		}
	}
	return newRegistry(append(ops, flexFlowOps()...))
}

func flexFlowOps() []*Op {
	dim := ParamSpec{Name: "dim", Min: 0, Max: MaxRank - 1, Generate: []int{0, 1, 2}, Check: []int{0, 1, 2}}
	degree := ParamSpec{Name: "degree", Min: 1, Max: MaxDegree, Named: map[int]string{DegreeVar: "d"},
		Generate: []int{2}, Check: []int{1, 2, 3, 4}, Degree: true}
	ff := []string{"PM_PARALLEL_DIM", "PM_PARALLEL_DEGREE"}
	return []*Op{
		{Name: "ff_replicate", Attrs: CutAttrs{}, Doc: "FlexFlow's replicate, read as its values: degree copies concatenated along dim, each on its own devices", Arity: 1, Outputs: 1, Z3: []string{"ff_replicate"}, Pointwise: PointwiseOpaque,
			Set: SetFlexFlow, Params: []ParamSpec{dim, degree}, Layout: layoutCutsOnly,
			Shape: ffReplicateShape, Cost: CostPerOutput, IntKernel: tileKernel[uint32], FloatKernel: tileKernel[float64],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			FlexFlow: FlexFlowForm{Type: "OP_REPLICATE", Params: ff, Required: ff, Operands: []int{1}},
			Keys:     cutKeys()},
		{Name: "ff_reduce", Attrs: CutAttrs{}, Doc: "FlexFlow's reduce, read as its values: the degree equal slices of dim added", Arity: 1, Outputs: 1, Z3: []string{"ff_reduce"}, Pointwise: PointwiseOpaque,
			Set: SetFlexFlow, Params: []ParamSpec{dim, degree}, Layout: layoutCutsOnly,
			Shape: ffReduceShape, Cost: CostPerOutput, IntKernel: sliceSumKernel[uint32, Mod], FloatKernel: sliceSumKernel[float64, Real],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			FlexFlow: FlexFlowForm{Type: "OP_REDUCE", Params: ff, Required: ff, Operands: []int{1}},
			Keys:     cutKeys()},
		{Name: "ff_linear", Attrs: ActivationAttrs{}, Doc: "FlexFlow's linear, read as its values: the whole product, cut as its operands' rows and columns", Arity: 2, Outputs: 1, Z3: []string{"ff_linear"}, Pointwise: PointwiseOpaque,
			Set:       SetFlexFlow,
			Operands:  []Operand{{Name: "input", Data: true}, {Name: "weight", Weight: true}},
			Params:    []ParamSpec{{Name: "activation", Symbols: activationSymbols, Generate: []int{ActNone, ActRelu}}},
			Piecewise: func(p []int) bool { return p[0] == ActRelu },
			Layout:    layoutCutsOnly,
			Shape:     ffLinearShape, Cost: CostProduct, IntKernel: linearKernel[uint32, Mod], FloatKernel: linearKernel[float64, Real],
			ONNX: ONNXForm{None: true}, TASO: TASOForm{None: true},
			FlexFlow: FlexFlowForm{Type: "OP_LINEAR", Params: []string{"PM_ACTI"}, Operands: []int{2}},
			Keys:     linearKeys()},
	}
}

// layoutCutsOnly refuses partial sums and copies: FlexFlow's reading
// keeps its replicas in named dimensions, as cuts.
func layoutCutsOnly(_ []int, in []Shape) error {
	for i, s := range in {
		if s.SumDegree() > 1 || s.CopyDegree() > 1 {
			return shapeErrorf("operand %d holds partial sums or copies, which FlexFlow's reading keeps in dimensions", i)
		}
	}
	return nil
}

// ffReplicateShape multiplies a dimension's size and degree by the degree.
func ffReplicateShape(p []int, in []Shape) ([]Shape, error) {
	dim, d, x := p[0], p[1], in[0]
	if err := checkDimDegree(x, dim, d); err != nil {
		return nil, err
	}
	out := x
	out.Dims[dim] *= d
	out.Degrees[dim] = x.Degree(dim) * d
	out.Split[dim] = nil
	out.normalizeLayout()
	return []Shape{out}, out.CheckLayout()
}

// ffReduceShape divides a dimension's size and degree by the degree.
func ffReduceShape(p []int, in []Shape) ([]Shape, error) {
	dim, d, x := p[0], p[1], in[0]
	if err := checkDimDegree(x, dim, d); err != nil {
		return nil, err
	}
	if x.Dims[dim]%d != 0 || x.Degree(dim)%d != 0 {
		return nil, shapeErrorf("degree %d divides neither the size nor the %d pieces of dimension %d of %s", d, x.Degree(dim), dim, x)
	}
	out := x
	out.Dims[dim] /= d
	out.Degrees[dim] = x.Degree(dim) / d
	out.Split[dim] = nil
	out.normalizeLayout()
	return []Shape{out}, nil
}

// ffLinearShape is x (…, in) times w (in, out), whole: the contraction must
// be cut alike in both, and the result is cut as x's rows and w's columns.
func ffLinearShape(p []int, in []Shape) ([]Shape, error) {
	x, w := in[0], in[1]
	if x.Rank < 2 || x.Rank > 3 || w.Rank != 2 {
		return nil, shapeErrorf("expected an input of rank 2 or 3 and a weight matrix, got %s and %s", x, w)
	}
	if x.Dims[x.Rank-1] != w.Dims[0] {
		return nil, shapeErrorf("input features %d differ from weight rows %d: %s times %s", x.Dims[x.Rank-1], w.Dims[0], x, w)
	}
	if x.Degree(x.Rank-1) != w.Degree(0) {
		return nil, shapeErrorf("contraction dimension cut in %d and %d pieces: %s times %s", x.Degree(x.Rank-1), w.Degree(0), x, w)
	}
	out := x
	out.Dims[out.Rank-1], out.Split[out.Rank-1] = w.Dims[1], w.Split[1]
	out.Degrees[out.Rank-1] = w.Degrees[1]
	out.normalizeLayout()
	return []Shape{out}, out.CheckLayout()
}

// tileKernel concatenates copies of x along dimension p[0].
func tileKernel[T any](p []int, in []*Tensor[T], out []*Tensor[T]) {
	x, y := in[0], out[0]
	outer, n, inner := splitAt(x.Shape, p[0])
	d := y.Shape.Dims[p[0]] / n
	for o := range outer {
		src := x.Data[o*n*inner : (o+1)*n*inner]
		for k := range d {
			copy(y.Data[(o*d+k)*n*inner:], src)
		}
	}
}

// sliceSumKernel adds the p[1] equal slices of x along dimension p[0].
func sliceSumKernel[T any, R Ring[T]](p []int, in []*Tensor[T], out []*Tensor[T]) {
	var r R
	x, y := in[0], out[0]
	outer, n, inner := splitAt(y.Shape, p[0])
	d := p[1]
	for o := range outer {
		dst := y.Data[o*n*inner : (o+1)*n*inner]
		copy(dst, x.Data[o*d*n*inner:])
		for k := 1; k < d; k++ {
			src := x.Data[(o*d+k)*n*inner:]
			for i := range dst {
				dst[i] = r.Add(dst[i], src[i])
			}
		}
	}
}

// splitAt returns the number of elements before dimension dim (outer), its
// size, and the number of elements after it (inner).
func splitAt(s Shape, dim int) (outer, n, inner int) {
	outer, inner = 1, 1
	for i := 0; i < dim; i++ {
		outer *= s.Dims[i]
	}
	for i := dim + 1; i < s.Rank; i++ {
		inner *= s.Dims[i]
	}
	return outer, s.Dims[dim], inner
}
