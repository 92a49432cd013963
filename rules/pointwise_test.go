package rules

import (
	"math"
	"slices"
	"testing"
)

// registryRows lists every row of every registry once: the default and
// parallel sets, and FlexFlow's reading.
func registryRows() []*Op {
	var out []*Op
	seen := map[string]bool{}
	for _, op := range append(slices.Clone(All().Ops()), FlexFlowReading().Ops()...) {
		if !seen[op.Name] {
			seen[op.Name] = true
			out = append(out, op)
		}
	}
	return out
}

// TestEveryOperatorNamesItsPointwiseClass holds each row to naming its
// pointwise class, PointwiseOpaque included, and to the parameters its
// class relies on.
func TestEveryOperatorNamesItsPointwiseClass(t *testing.T) {
	for _, op := range registryRows() {
		switch op.Pointwise {
		case PointwiseUnset:
			t.Errorf("%s: no pointwise class; set Pointwise in its row (PointwiseOpaque if the verifier knows nothing of its elements)", op.Name)
		case PointwiseLinearActivated:
			if op.activationParam() < 0 {
				t.Errorf("%s: PointwiseLinearActivated without an activation parameter", op.Name)
			}
		case PointwiseMax:
			if _, ok := op.Attrs.(WindowAttrs); !ok {
				t.Errorf("%s: PointwiseMax with Attrs %T, want WindowAttrs", op.Name, op.Attrs)
			}
		case PointwiseScale:
			if op.Arity != 2 || !op.ScalarOperand(1) {
				t.Errorf("%s: PointwiseScale needs a scalar second operand", op.Name)
			}
		}
	}
}

// pointwiseSample is an application of an operator at which its class is
// checked against its float kernel.
type pointwiseSample struct {
	params []int
	in     []Shape // the constant's shape, for a constant
}

// TestPointwiseClassesMatchKernels checks each class that says something
// against the operator's float kernel: element-wise classes compute their
// formula, non-negative ones give no negative element, and sign-keeping
// ones give none from non-negative operands.
func TestPointwiseClassesMatchKernels(t *testing.T) {
	x, k := NewShape(2, 4, 5, 5), NewShape(4, 4, 3, 3)
	samples := map[string]pointwiseSample{
		NameEwadd: {nil, []Shape{x, x}}, NameEwmul: {nil, []Shape{x, x}}, NameSmul: {nil, []Shape{x, NewShape()}},
		NameRelu: {nil, []Shape{x}}, NameTranspose: {nil, []Shape{NewShape(2, 4)}},
		NameMatmul: {nil, []Shape{NewShape(2, 4), NewShape(4, 4)}}, NameConv2D: {[]int{1, PadSame, ActRelu, 1}, []Shape{x, k}},
		NameEnlarge: {[]int{3}, []Shape{NewShape(4, 4, 1, 3)}}, NamePoolAvg: {[]int{3, 1, PadSame}, []Shape{x}},
		NamePoolMax: {[]int{3, 1, PadSame}, []Shape{x}}, NameConcat: {[]int{1}, []Shape{x, x}},
		NameCPool: {[]int{3}, []Shape{NewShape(4, 1, 3, 3)}}, NameIEwmul: {nil, []Shape{x}},
	}
	for _, op := range registryRows() {
		if op.Pointwise == PointwiseOpaque {
			continue
		}
		s, ok := samples[op.Name]
		if !ok {
			t.Errorf("%s: pointwise class %d but no sample application here to check it at", op.Name, op.Pointwise)
			continue
		}
		for _, nonNegative := range []bool{false, true} {
			in, out := evalSample(t, op, s, nonNegative)
			checkPointwise(t, op, in, out, nonNegative)
		}
	}
}

// evalSample runs op's float kernel on operands of values in [-4, 4], or
// [0, 4] when nonNegative.
func evalSample(t *testing.T, op *Op, s pointwiseSample, nonNegative bool) (in []*FloatTensor, out *FloatTensor) {
	t.Helper()
	var constShape Shape
	if op.IsConstant() {
		constShape = s.in[0]
	} else {
		for i, sh := range s.in {
			ft := NewTensor[float64](sh)
			for j := range ft.Data {
				v := float64((j*7+i*3)%9) - 4
				if nonNegative {
					v = math.Abs(v)
				}
				ft.Data[j] = v
			}
			in = append(in, ft)
		}
	}
	res, err := Eval(op, op.FloatKernel, s.params, in, constShape)
	if err != nil {
		t.Fatalf("%s: %v", op.Name, err)
	}
	return in, res[0]
}

// checkPointwise holds one evaluation to what op's class says.
func checkPointwise(t *testing.T, op *Op, in []*FloatTensor, out *FloatTensor, nonNegative bool) {
	t.Helper()
	formula := map[Pointwise]func(j int) float64{
		PointwiseSum:     func(j int) float64 { return in[0].Data[j] + in[1].Data[j] },
		PointwiseProduct: func(j int) float64 { return in[0].Data[j] * in[1].Data[j] },
		PointwiseScale:   func(j int) float64 { return in[0].Data[j] * in[1].Data[0] },
		PointwiseRelu:    func(j int) float64 { return max(in[0].Data[j], 0) },
		PointwiseOnes:    func(int) float64 { return 1 },
	}[op.Pointwise]
	mustBeNonNegative := op.Pointwise.NonNegative() || nonNegative && op.Pointwise.KeepsSign()
	for j, v := range out.Data {
		if formula != nil && v != formula(j) {
			t.Fatalf("%s (class %d) element %d: kernel %v, class formula %v", op.Name, op.Pointwise, j, v, formula(j))
		}
		if mustBeNonNegative && v < 0 {
			t.Fatalf("%s (class %d) element %d is %v, but its class says it is not negative here", op.Name, op.Pointwise, j, v)
		}
	}
}

// TestActivationOfLinearActivated checks ReluActivated and
// WithoutActivation on conv2d, the one PointwiseLinearActivated row.
func TestActivationOfLinearActivated(t *testing.T) {
	conv, _ := Default().Lookup(NameConv2D)
	matmul, _ := Default().Lookup(NameMatmul)
	relu := ConvAttrs{Stride: 1, Padding: PadSame, Activation: ActRelu, Groups: 1}.Params()
	plain := ConvAttrs{Stride: 1, Padding: PadSame, Activation: ActNone, Groups: 1}.Params()
	cases := []struct {
		op      *Op
		p       []int
		relu    bool
		without []int
	}{
		{conv, relu, true, plain},
		{conv, plain, false, plain},
		{matmul, nil, false, nil},
	}
	for _, c := range cases {
		if got := c.op.ReluActivated(c.p); got != c.relu {
			t.Errorf("%s%v: ReluActivated %v, want %v", c.op.Name, c.p, got, c.relu)
		}
		if got := c.op.WithoutActivation(c.p); !slices.Equal(got, c.without) {
			t.Errorf("%s%v: WithoutActivation %v, want %v", c.op.Name, c.p, got, c.without)
		}
	}
	if ConvOf(relu).Activation != ActRelu {
		t.Errorf("WithoutActivation changed its argument: %v", relu)
	}
}

// TestFanIn checks the factors of each row's fan-in at one application.
func TestFanIn(t *testing.T) {
	x := NewShape(2, 4, 5, 5)
	cases := []struct {
		op     string
		params []int
		in     []Shape
		want   int // product of the factors; 0 for no FanIn
	}{
		{NameMatmul, nil, []Shape{NewShape(2, 3), NewShape(3, 4)}, 3},
		{NameConv2D, ConvAttrs{Stride: 1, Padding: PadSame, Groups: 2}.Params(), []Shape{x, NewShape(4, 2, 3, 1)}, 6},
		{NamePoolAvg, WindowAttrs{Kernel: 3, Stride: 1}.Params(), []Shape{x}, 9},
		{NamePoolMax, WindowAttrs{Kernel: 2, Stride: 2}.Params(), []Shape{x}, 4},
		{NameEwadd, nil, []Shape{x, x}, 0},
	}
	for _, c := range cases {
		op, _ := All().Lookup(c.op)
		got := 0
		if op.FanIn != nil {
			got = 1
			for _, f := range op.FanIn(c.params, c.in) {
				got *= f
			}
		}
		if got != c.want {
			t.Errorf("%s: fan-in %d, want %d", c.op, got, c.want)
		}
	}
}
