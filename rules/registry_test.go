package rules

import (
	"slices"
	"strings"
	"testing"
)

func TestShapeErrorsAreClear(t *testing.T) {
	reg := Default()
	cases := []struct {
		op     string
		params []int
		in     []Shape
		want   string
	}{
		{"ewadd", nil, []Shape{NewShape(2, 4), NewShape(4, 4)}, "ewadd: operands must have equal shapes, got 2x4 and 4x4"},
		{"matmul", nil, []Shape{NewShape(2, 4), NewShape(2, 4)}, "matmul: inner dimensions differ"},
		{"smul", nil, []Shape{NewShape(2, 4), NewShape(2, 4)}, "smul: second operand must be a scalar"},
		{"conv2d", []int{1, PadSame, ActNone, 1}, []Shape{NewShape(2, 4), NewShape(4, 4, 3, 3)}, "conv2d: expected input NCHW"},
		{"conv2d", []int{1, PadSame, ActNone, 1}, []Shape{NewShape(2, 3, 5, 5), NewShape(4, 2, 3, 3)}, "are not groups 1 times kernel input channels 2"},
		{"split", []int{0}, []Shape{NewShape(4, 4)}, "split: operand has no concat history"},
		{"concat", []int{1}, []Shape{NewShape(2, 4), NewShape(4, 4)}, "differ off axis 1"},
		{"transpose", nil, []Shape{NewShape(2, 4, 5)}, "must be a matrix (rank 2)"},
		{"pool_max", []int{3, 1, PadValid}, []Shape{NewShape(1, 1, 2, 2)}, "window 3 exceeds extent 2"},
		{"I_matmul", nil, []Shape{NewShape(2, 4)}, "square matrix"},
		{"enlarge", []int{3}, []Shape{NewShape(4, 4, 2, 2)}, "cannot be centred"},
	}
	for _, c := range cases {
		op, _ := reg.Lookup(c.op)
		_, err := op.InferShapes(c.params, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s%v: got error %v, want one containing %q", c.op, c.in, err, c.want)
		}
	}
}

func TestEveryOperatorIsDefinedOnce(t *testing.T) {
	reg := Default()
	z3 := map[string]string{}
	for _, op := range reg.Ops() {
		if len(op.Z3) != op.Outputs {
			t.Errorf("%s: %d Z3 symbols for %d outputs", op.Name, len(op.Z3), op.Outputs)
		}
		for _, s := range op.Z3 {
			if prev, dup := z3[s]; dup {
				t.Errorf("Z3 symbol %s used by %s and %s", s, prev, op.Name)
			}
			z3[s] = op.Name
		}
		if op.Shape == nil || op.IntKernel == nil || op.FloatKernel == nil {
			t.Errorf("%s: missing shape rule or kernel", op.Name)
		}
		for _, p := range op.Params {
			for _, v := range p.Generate {
				if got, err := p.Parse(p.Format(v)); err != nil || got != v {
					t.Errorf("%s.%s: value %d does not round-trip through text", op.Name, p.Name, v)
				}
			}
		}
	}
	if _, err := reg.Select([]string{"matmul", "nope"}); err == nil || !strings.Contains(err.Error(), `unknown operator "nope"`) {
		t.Errorf("Select with an unknown operator: %v", err)
	}
}

// TestModAndRealAgree checks each kernel's two instantiations agree on
// small integer inputs, where float64 arithmetic is exact.
func TestModAndRealAgree(t *testing.T) {
	reg := Default()
	x, k := NewShape(2, 4, 5, 5), NewShape(4, 4, 3, 3)
	cases := []struct {
		op     string
		params []int
		in     []Shape
	}{
		{"ewadd", nil, []Shape{x, x}}, {"ewmul", nil, []Shape{x, x}}, {"smul", nil, []Shape{x, NewShape()}},
		{"transpose", nil, []Shape{NewShape(2, 4)}}, {"matmul", nil, []Shape{NewShape(2, 4), NewShape(4, 4)}},
		{"conv2d", []int{1, PadSame, ActRelu, 1}, []Shape{x, k}}, {"conv2d", []int{2, PadValid, ActNone, 2}, []Shape{x, NewShape(4, 2, 1, 3)}},
		{"enlarge", []int{3}, []Shape{NewShape(4, 4, 1, 3)}}, {"relu", nil, []Shape{x}},
		{"pool_max", []int{3, 1, PadSame}, []Shape{x}}, {"pool_avg", []int{3, 2, PadValid}, []Shape{x}},
		{"concat", []int{1}, []Shape{x, x}},
	}
	for _, c := range cases {
		op, _ := reg.Lookup(c.op)
		var ints []*IntTensor
		var floats []*FloatTensor
		for i, s := range c.in {
			it, ft := NewTensor[uint32](s), NewTensor[float64](s)
			for j := range it.Data {
				v := int64((j*7+i*3)%9) - 4
				it.Data[j], ft.Data[j] = ModFromInt(v), float64(v)
			}
			ints, floats = append(ints, it), append(floats, ft)
		}
		io, err := Eval(op, op.IntKernel, c.params, ints, Shape{})
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		fo, _ := Eval(op, op.FloatKernel, c.params, floats, Shape{})
		scale := 1.0
		if c.op == "pool_avg" {
			scale = 9 // compare sums: 1/9 is not an integer modulo the prime
		}
		for o := range io {
			for j := range io[o].Data {
				want := ModFromInt(int64(fo[o].Data[j]*scale + 0.5*sign(fo[o].Data[j])))
				got := io[o].Data[j]
				if scale != 1 {
					got = Mod{}.Mul(got, 9)
				}
				if got != want {
					t.Fatalf("%s output %d[%d]: modular %d, float %v", c.op, o, j, got, fo[o].Data[j])
				}
			}
		}
	}
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

// TestCommutativeOperators checks the Commutative flag against the
// kernels: a flagged operator gives the same result with its operands
// swapped, and the unflagged binary operators here do not (so the flag is
// not missing where it would help).
func TestCommutativeOperators(t *testing.T) {
	reg := Default()
	cases := []struct {
		op     string
		params []int
	}{{"ewadd", nil}, {"ewmul", nil}, {"matmul", nil}, {"concat", []int{0}}}
	for _, c := range cases {
		op, _ := reg.Lookup(c.op)
		a, b := NewTensor[uint32](NewShape(4, 4)), NewTensor[uint32](NewShape(4, 4))
		for j := range a.Data {
			a.Data[j], b.Data[j] = ModFromInt(int64(j%5)-2), ModFromInt(int64(j*3%7)-3)
		}
		ab, err := Eval(op, op.IntKernel, c.params, []*IntTensor{a, b}, Shape{})
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		ba, _ := Eval(op, op.IntKernel, c.params, []*IntTensor{b, a}, Shape{})
		if same := slices.Equal(ab[0].Data, ba[0].Data); same != op.Commutative {
			t.Errorf("%s: swapping the operands changes nothing: %v; flagged commutative: %v", c.op, same, op.Commutative)
		}
	}
}

// TestOperandRoles: scalars feed smul alone (either operand, so that two
// scalars meet), kernels never feed a data operand, activations never a
// kernel operand.
func TestOperandRoles(t *testing.T) {
	reg := Default()
	cases := []struct {
		op      string
		operand int
		role    Role
		want    bool
	}{
		{"smul", 0, RoleNeutral, true},
		{"smul", 1, RoleNeutral, true},
		{"smul", 0, RoleData, true},
		{"smul", 1, RoleData, false},
		{"smul", 1, RoleWeight, false},
		{"ewadd", 0, RoleNeutral, false},
		{"matmul", 1, RoleNeutral, false},
		{"conv2d", 0, RoleNeutral, false},
		{"conv2d", 0, RoleWeight, false},
		{"conv2d", 1, RoleData, false},
		{"conv2d", 1, RoleWeight, true},
		{"pool_avg", 0, RoleWeight, false},
		{"ewadd", 0, RoleWeight, true},
	}
	for _, c := range cases {
		op, ok := reg.Lookup(c.op)
		if !ok {
			t.Fatalf("no operator %s", c.op)
		}
		if got := op.Takes(c.operand, c.role); got != c.want {
			t.Errorf("%s operand %d takes %s: %v, want %v", c.op, c.operand, c.role, got, c.want)
		}
	}
}

// Symmetric padding pads half an odd window on every side: PyTorch's
// stride-2 convolutions and pools of ResNet's stem and stages.
func TestSymmetricPadding(t *testing.T) {
	reg := Default()
	cases := []struct {
		op     string
		params []int
		in     []Shape
		want   []int
	}{
		{"conv2d", []int{2, PadSym, ActNone, 1}, []Shape{NewShape(1, 3, 224, 224), NewShape(8, 3, 7, 7)}, []int{1, 8, 112, 112}},
		{"conv2d", []int{2, PadSym, ActNone, 1}, []Shape{NewShape(1, 4, 56, 56), NewShape(4, 4, 3, 3)}, []int{1, 4, 28, 28}},
		{"conv2d", []int{1, PadSym, ActNone, 1}, []Shape{NewShape(1, 4, 17, 17), NewShape(4, 4, 1, 7)}, []int{1, 4, 17, 17}},
		{"pool_max", []int{3, 2, PadSym}, []Shape{NewShape(1, 4, 112, 112)}, []int{1, 4, 56, 56}},
	}
	for _, c := range cases {
		op, _ := reg.Lookup(c.op)
		out, err := op.InferShapes(c.params, c.in)
		if err != nil || !slices.Equal(out[0].DimList(), c.want) {
			t.Errorf("%s %v %v: %v (%v), want %v", c.op, c.params, c.in, out, err, c.want)
		}
	}
	op, _ := reg.Lookup("pool_max")
	if _, err := op.InferShapes([]int{2, 2, PadSym}, []Shape{NewShape(1, 4, 8, 8)}); err == nil {
		t.Error("symmetric padding of an even window: no error")
	}
}
