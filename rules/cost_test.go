package rules

import "testing"

// TestEveryOperatorHasCost walks every registry and fails on a row
// without a cost rule.
func TestEveryOperatorHasCost(t *testing.T) {
	for _, reg := range []*Registry{All(), FlexFlowReading()} {
		for _, op := range reg.Ops() {
			if op.Cost == CostUnset {
				t.Errorf("%s has no Cost: set one in its row", op.Name)
			}
		}
	}
}

func TestWork(t *testing.T) {
	for _, c := range []struct {
		op     string
		params []int
		in     []Shape
		want   Work
	}{
		{NameConv2D, ConvAttrs{Stride: 1, Padding: PadSame, Groups: 1}.Params(),
			[]Shape{NewShape(1, 3, 8, 8), NewShape(4, 3, 3, 3)}, Work{FLOPs: 2 * 256 * 27, Bytes: 4 * (192 + 108 + 256)}},
		{NameMatmul, nil, []Shape{NewShape(6, 5), NewShape(5, 7)}, Work{FLOPs: 2 * 42 * 5, Bytes: 4 * (30 + 35 + 42)}},
		{NamePoolMax, WindowAttrs{Kernel: 3, Stride: 1, Padding: PadSame}.Params(),
			[]Shape{NewShape(1, 2, 4, 4)}, Work{FLOPs: 32 * 9, Bytes: 4 * 64}},
		{NameRelu, nil, []Shape{NewShape(2, 5)}, Work{FLOPs: 10, Bytes: 4 * 20}},
		{NameSplit, AxisAttrs{Axis: 0}.Params(), []Shape{splitHistory()}, Work{FLOPs: 6, Bytes: 4 * 12}},
		{NameLinear, ActivationAttrs{}.Params(), []Shape{NewShape(6, 5), NewShape(5, 7)}, Work{FLOPs: 2 * 42 * 5, Bytes: 4 * (30 + 35 + 42)}},
	} {
		t.Run(c.op, func(t *testing.T) {
			op, _ := All().Lookup(c.op)
			out, err := op.Shape(c.params, c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := op.Work(c.params, c.in, out); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// splitHistory is a (2+4)×1 matrix that remembers its concat.
func splitHistory() Shape {
	out, err := concatShape([]int{0}, []Shape{NewShape(2, 1), NewShape(4, 1)})
	if err != nil {
		panic(err)
	}
	return out[0]
}

func TestLabel(t *testing.T) {
	conv, _ := All().Lookup(NameConv2D)
	for _, c := range []struct {
		params []int
		want   string
	}{
		{ConvAttrs{Stride: 1, Activation: ActRelu, Groups: 1}.Params(), "conv2d+relu"},
		{ConvAttrs{Stride: 1, Activation: ActNone, Groups: 1}.Params(), "conv2d"},
	} {
		if got := conv.Label(c.params); got != c.want {
			t.Errorf("Label(%v) = %q, want %q", c.params, got, c.want)
		}
	}
}
