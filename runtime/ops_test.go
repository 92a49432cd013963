package runtime

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
)

// runNode runs a one-node model: float inputs fed at run time, constant
// operands as initializers. It returns the outputs in order.
func runNode(t *testing.T, opset int64, node []byte, inits [][]byte, inputs []namedTensor, outputs ...string) []*Tensor {
	t.Helper()
	var infos [][]byte
	feed := map[string]*Tensor{}
	for _, in := range inputs {
		infos = append(infos, pbValueInfoShape(in.name, in.t.Shape))
		feed[in.name] = in.t
	}
	var outInfos [][]byte
	for _, o := range outputs {
		outInfos = append(outInfos, pbValueInfo(o))
	}
	m, _, err := fromBytes(pbModel(opset, pbGraph([][]byte{node}, inits, infos, outInfos)), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var results []*Tensor
	for _, threads := range []int{1, 3} {
		s, err := m.NewSession(SessionOptions{Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Run(context.Background(), feed)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range outputs {
			if threads == 1 {
				results = append(results, got[o])
			} else if !slices.Equal(got[o].Data, results[i].Data) {
				t.Fatalf("output %s differs between 1 and 3 threads", o)
			}
		}
	}
	return results
}

type namedTensor struct {
	name string
	t    *Tensor
}

func randomTensor(seed uint64, shape ...int) *Tensor {
	t := NewTensor(shape...)
	fillUniform(t.Data, seed, 1)
	return t
}

func assertClose(t *testing.T, got *Tensor, shape []int, want []float32) {
	t.Helper()
	if err := compareTensor(got, shape, want); err != nil {
		t.Fatal(err)
	}
}

// naiveConv2D is the textbook definition, for checking the im2col path.
func naiveConv2D(x, w *Tensor, bias []float32, group int, strides, dilations, padBegin, out []int) []float32 {
	y := make([]float32, numElements(out))
	cg, mg := x.Shape[1]/group, out[1]/group
	kh, kw := w.Shape[2], w.Shape[3]
	i := 0
	for n := range out[0] {
		for m := range out[1] {
			g := m / mg
			for oy := range out[2] {
				for ox := range out[3] {
					acc := float32(0)
					if bias != nil {
						acc = bias[m]
					}
					for c := range cg {
						for ky := range kh {
							for kx := range kw {
								iy := oy*strides[0] - padBegin[0] + ky*dilations[0]
								ix := ox*strides[1] - padBegin[1] + kx*dilations[1]
								if iy < 0 || iy >= x.Shape[2] || ix < 0 || ix >= x.Shape[3] {
									continue
								}
								acc += x.Data[((n*x.Shape[1]+g*cg+c)*x.Shape[2]+iy)*x.Shape[3]+ix] *
									w.Data[((m*cg+c)*kh+ky)*kw+kx]
							}
						}
					}
					y[i] = acc
					i++
				}
			}
		}
	}
	return y
}

// TestConvAgainstNaive covers what the ONNX node tests do not: groups,
// dilations, batches, 1×1 kernels, bias, 1-D convolutions.
func TestConvAgainstNaive(t *testing.T) {
	tests := []struct {
		x, w                     []int
		group                    int
		strides, dilations, pads []int
		bias                     bool
		wantOut                  []int
	}{
		{[]int{1, 3, 9, 9}, []int{4, 3, 3, 3}, 1, []int{1, 1}, []int{1, 1}, []int{1, 1, 1, 1}, true, []int{1, 4, 9, 9}},
		{[]int{2, 4, 8, 7}, []int{6, 2, 3, 2}, 2, []int{2, 1}, []int{1, 2}, []int{1, 0, 2, 1}, true, []int{2, 6, 5, 6}},
		{[]int{1, 8, 6, 6}, []int{8, 1, 3, 3}, 8, []int{1, 1}, []int{2, 2}, []int{2, 2, 2, 2}, false, []int{1, 8, 6, 6}},
		{[]int{2, 5, 4, 4}, []int{7, 5, 1, 1}, 1, []int{1, 1}, []int{1, 1}, []int{0, 0, 0, 0}, true, []int{2, 7, 4, 4}},
		{[]int{1, 3, 10, 10}, []int{2, 3, 1, 1}, 1, []int{3, 3}, []int{1, 1}, []int{0, 0, 0, 0}, false, []int{1, 2, 4, 4}},
		{[]int{1, 2, 1, 11}, []int{3, 2, 1, 4}, 1, []int{1, 2}, []int{1, 3}, []int{0, 2, 0, 1}, true, []int{1, 3, 1, 3}},
		// Gathered in blocks of output rows (columns past colBudget), the
		// last one shorter.
		{[]int{1, 32, 77, 75}, []int{40, 32, 3, 3}, 1, []int{1, 1}, []int{1, 1}, []int{1, 1, 1, 1}, true, []int{1, 40, 77, 75}},
		// Weights packed: gemm computes this product transposed.
		{[]int{1, 64, 7, 7}, []int{96, 64, 3, 3}, 1, []int{1, 1}, []int{1, 1}, []int{1, 1, 1, 1}, true, []int{1, 96, 7, 7}},
		// Tiles (runNode's 3 threads): a direct convolution over a large
		// image, and a strided grouped one in tiles of rows.
		{[]int{1, 16, 40, 40}, []int{24, 16, 1, 1}, 1, []int{1, 1}, []int{1, 1}, []int{0, 0, 0, 0}, true, []int{1, 24, 40, 40}},
		{[]int{2, 6, 33, 31}, []int{8, 3, 3, 3}, 2, []int{2, 1}, []int{1, 1}, []int{1, 1, 1, 1}, true, []int{2, 8, 17, 31}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			x, w := randomTensor(1, tc.x...), randomTensor(2, tc.w...)
			var bias []float32
			inits := [][]byte{pbFloatTensor("w", toInt64s(tc.w), w.Data)}
			in := []string{"x", "w"}
			if tc.bias {
				bias = randomTensor(3, tc.w[0]).Data
				inits = append(inits, pbFloatTensor("b", []int64{int64(tc.w[0])}, bias))
				in = append(in, "b")
			}
			node := pbNode("Conv", in, []string{"y"}, pbAttrInt("group", int64(tc.group)),
				pbAttrInts("strides", toInt64s(tc.strides)...), pbAttrInts("dilations", toInt64s(tc.dilations)...),
				pbAttrInts("pads", toInt64s(tc.pads)...))
			got := runNode(t, 13, node, inits, []namedTensor{{"x", x}}, "y")[0]
			want := naiveConv2D(x, w, bias, tc.group, tc.strides, tc.dilations, tc.pads[:2], tc.wantOut)
			assertClose(t, got, tc.wantOut, want)
		})
	}
	t.Run("1-D", func(t *testing.T) {
		x, w := randomTensor(1, 1, 2, 11), randomTensor(2, 3, 2, 4)
		node := pbNode("Conv", []string{"x", "w"}, []string{"y"}, pbAttrInts("strides", 2),
			pbAttrInts("dilations", 3), pbAttrInts("pads", 2, 1))
		got := runNode(t, 13, node, [][]byte{pbFloatTensor("w", []int64{3, 2, 4}, w.Data)}, []namedTensor{{"x", x}}, "y")[0]
		lifted := naiveConv2D(&Tensor{Shape: []int{1, 2, 1, 11}, Data: x.Data}, &Tensor{Shape: []int{3, 2, 1, 4}, Data: w.Data},
			nil, 1, []int{1, 2}, []int{1, 3}, []int{0, 2}, []int{1, 3, 1, 3})
		assertClose(t, got, []int{1, 3, 3}, lifted)
	})
}

func toInt64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// naiveMatMul multiplies with numpy's broadcasting, for rank ≥ 2 operands.
func naiveMatMul(a, b *Tensor, out []int) []float32 {
	m, k, n := a.Shape[len(a.Shape)-2], a.Shape[len(a.Shape)-1], b.Shape[len(b.Shape)-1]
	batch := out[:len(out)-2]
	l := newBroadcastLayout(a.Shape[:len(a.Shape)-2], b.Shape[:len(b.Shape)-2], batch)
	y := make([]float32, numElements(out))
	for bi := range numElements(batch) {
		ao, bo := l.at(bi)
		for i := range m {
			for j := range n {
				acc := float32(0)
				for p := range k {
					acc += a.Data[ao*m*k+i*k+p] * b.Data[bo*k*n+p*n+j]
				}
				y[bi*m*n+i*n+j] = acc
			}
		}
	}
	return y
}

func TestMatMulBroadcasting(t *testing.T) {
	tests := []struct{ a, b, out []int }{
		{[]int{2, 1, 3, 4}, []int{5, 4, 6}, []int{2, 5, 3, 6}},
		{[]int{3, 4}, []int{2, 4, 5}, []int{2, 3, 5}},
		{[]int{1, 7, 70, 130}, []int{130, 200}, []int{1, 7, 70, 200}},
		{[]int{4, 1, 9}, []int{1, 9, 3}, []int{4, 1, 3}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			a, b := randomTensor(1, tc.a...), randomTensor(2, tc.b...)
			got := runNode(t, 13, pbNode("MatMul", []string{"a", "b"}, []string{"y"}), nil,
				[]namedTensor{{"a", a}, {"b", b}}, "y")[0]
			assertClose(t, got, tc.out, naiveMatMul(a, b, tc.out))
		})
	}
	t.Run("vectors", func(t *testing.T) {
		a, b, m := randomTensor(1, 4), randomTensor(2, 4), randomTensor(3, 2, 4, 3)
		dot := runNode(t, 13, pbNode("MatMul", []string{"a", "b"}, []string{"y"}), nil, []namedTensor{{"a", a}, {"b", b}}, "y")[0]
		want := float32(0)
		for i := range 4 {
			want += a.Data[i] * b.Data[i]
		}
		assertClose(t, dot, []int{}, []float32{want})
		vm := runNode(t, 13, pbNode("MatMul", []string{"a", "m"}, []string{"y"}), nil, []namedTensor{{"a", a}, {"m", m}}, "y")[0]
		assertClose(t, vm, []int{2, 3}, naiveMatMul(&Tensor{Shape: []int{1, 4}, Data: a.Data}, m, []int{2, 1, 3}))
	})
}

func TestPadModes(t *testing.T) {
	x := &Tensor{Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}}
	tests := []struct {
		mode  string
		pads  []int64
		shape []int
		want  []float32
	}{
		{"constant", []int64{1, 0, 0, 2}, []int{3, 5}, []float32{9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9}},
		{"reflect", []int64{0, 2, 0, 1}, []int{2, 6}, []float32{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5}},
		{"edge", []int64{1, 1, 0, 1}, []int{3, 5}, []float32{1, 1, 2, 3, 3, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6}},
		{"constant", []int64{0, -1, 0, 1}, []int{2, 3}, []float32{2, 3, 9, 5, 6, 9}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			node := pbNode("Pad", []string{"x", "pads", "v"}, []string{"y"}, pbAttrString("mode", tc.mode))
			inits := [][]byte{pbInt64Tensor("pads", []int64{4}, tc.pads), pbFloatTensor("v", nil, []float32{9})}
			got := runNode(t, 13, node, inits, []namedTensor{{"x", x}}, "y")[0]
			assertClose(t, got, tc.shape, tc.want)
		})
	}
	// Zeros around the last two dimensions go plane by plane (zeroBorder).
	t.Run("zero border", func(t *testing.T) {
		x := randomTensor(5, 2, 3, 4, 5)
		node := pbNode("Pad", []string{"x", "pads"}, []string{"y"})
		pads := []int64{0, 0, 1, 2, 0, 0, 2, 1}
		got := runNode(t, 13, node, [][]byte{pbInt64Tensor("pads", []int64{8}, pads)}, []namedTensor{{"x", x}}, "y")[0]
		want := make([]float32, 2*3*7*8)
		for p := range 6 {
			for i := range 4 {
				for j := range 5 {
					want[p*56+(i+1)*8+j+2] = x.Data[p*20+i*5+j]
				}
			}
		}
		assertClose(t, got, []int{2, 3, 7, 8}, want)
	})
	t.Run("opset 2 attributes", func(t *testing.T) {
		node := pbNode("Pad", []string{"x"}, []string{"y"}, pbAttrInts("pads", 0, 1, 0, 0), pbAttrFloat("value", 7))
		got := runNode(t, 10, node, nil, []namedTensor{{"x", x}}, "y")[0]
		assertClose(t, got, []int{2, 4}, []float32{7, 1, 2, 3, 7, 4, 5, 6})
	})
}

// TestOpsetSemantics checks behaviour that changed between opsets.
func TestOpsetSemantics(t *testing.T) {
	x := &Tensor{Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}
	t.Run("Softmax before 13 normalises the flattened tail", func(t *testing.T) {
		got := runNode(t, 11, pbNode("Softmax", []string{"x"}, []string{"y"}, pbAttrInt("axis", 0)), nil, []namedTensor{{"x", x}}, "y")[0]
		sum := 0.0
		for _, v := range x.Data {
			sum += math.Exp(float64(v))
		}
		want := make([]float32, 4)
		for i, v := range x.Data {
			want[i] = float32(math.Exp(float64(v)) / sum)
		}
		assertClose(t, got, []int{2, 2}, want)
	})
	t.Run("ReduceMean axes as an input from 18", func(t *testing.T) {
		node := pbNode("ReduceMean", []string{"x", "axes"}, []string{"y"}, pbAttrInt("keepdims", 0))
		got := runNode(t, 18, node, [][]byte{pbInt64Tensor("axes", []int64{1}, []int64{0})}, []namedTensor{{"x", x}}, "y")[0]
		assertClose(t, got, []int{2}, []float32{2, 3})
	})
	t.Run("Split sizes as an attribute before 13", func(t *testing.T) {
		v := &Tensor{Shape: []int{5}, Data: []float32{1, 2, 3, 4, 5}}
		node := pbNode("Split", []string{"v"}, []string{"a", "b"}, pbAttrInts("split", 1, 4))
		got := runNode(t, 11, node, nil, []namedTensor{{"v", v}}, "a", "b")
		assertClose(t, got[0], []int{1}, []float32{1})
		assertClose(t, got[1], []int{4}, []float32{2, 3, 4, 5})
	})
	t.Run("Split num_outputs from 18 leaves the last part smaller", func(t *testing.T) {
		v := &Tensor{Shape: []int{5}, Data: []float32{1, 2, 3, 4, 5}}
		node := pbNode("Split", []string{"v"}, []string{"a", "b"}, pbAttrInt("num_outputs", 2))
		got := runNode(t, 18, node, nil, []namedTensor{{"v", v}}, "a", "b")
		assertClose(t, got[0], []int{3}, []float32{1, 2, 3})
		assertClose(t, got[1], []int{2}, []float32{4, 5})
	})
}

// TestBroadcastLayouts checks elementwise broadcasting against index
// arithmetic for shapes that exercise every inner-loop variant.
func TestBroadcastLayouts(t *testing.T) {
	tests := []struct{ a, b []int }{
		{[]int{2, 3, 4}, []int{2, 3, 4}},
		{[]int{2, 3, 4}, []int{}},
		{[]int{1}, []int{2, 3, 4}},
		{[]int{1, 8, 5, 5}, []int{1, 8, 1, 1}},
		{[]int{3, 1}, []int{1, 4}},
		{[]int{2, 1, 4}, []int{3, 1}},
		{[]int{64, 768}, []int{768}},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			a, b := randomTensor(1, tc.a...), randomTensor(2, tc.b...)
			out, err := broadcastShapes(tc.a, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			got := runNode(t, 13, pbNode("Sub", []string{"a", "b"}, []string{"y"}), nil, []namedTensor{{"a", a}, {"b", b}}, "y")[0]
			want := make([]float32, numElements(out))
			idx := make([]int, len(out))
			for i := range want {
				rem := i
				for d := len(out) - 1; d >= 0; d-- {
					idx[d] = rem % out[d]
					rem /= out[d]
				}
				want[i] = a.Data[broadcastIndex(idx, tc.a)] - b.Data[broadcastIndex(idx, tc.b)]
			}
			assertClose(t, got, out, want)
		})
	}
}

// broadcastIndex is the flat index in shape of the output position idx.
func broadcastIndex(idx, shape []int) int {
	flat := 0
	lead := len(idx) - len(shape)
	for d, n := range shape {
		i := idx[lead+d]
		if n == 1 {
			i = 0
		}
		flat = flat*n + i
	}
	return flat
}

// TestFoldingMatchesRun computes the same graph folded at load (x an
// initializer) and at Run (x an input).
func TestFoldingMatchesRun(t *testing.T) {
	x := randomTensor(5, 1, 2, 6, 6)
	folded, _, err := fromBytes(pipelineModel(true, x.Data), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(folded.Nodes()); n != 0 {
		t.Fatalf("%d nodes remain after folding, want 0", n)
	}
	s, err := folded.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := runNodes(t, pipelineModel(false, nil), map[string]*Tensor{"x": x})
	if !slices.Equal(got["y"].Shape, want["y"].Shape) || !slices.Equal(got["y"].Data, want["y"].Data) {
		t.Fatalf("run %v %v, folded %v %v", got["y"].Shape, got["y"].Data, want["y"].Shape, want["y"].Data)
	}
}

// runNodes loads and runs an encoded model once.
func runNodes(t *testing.T, model []byte, inputs map[string]*Tensor) map[string]*Tensor {
	t.Helper()
	m, _, err := fromBytes(model, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Run(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReduceLogSumExp checks the one reduction whose node tests are all
// float64, with inputs large enough to overflow a naive exp.
func TestReduceLogSumExp(t *testing.T) {
	x := &Tensor{Shape: []int{2, 3}, Data: []float32{1, 2, 3, 100, 101, 102}}
	node := pbNode("ReduceLogSumExp", []string{"x"}, []string{"y"}, pbAttrInts("axes", 1), pbAttrInt("keepdims", 0))
	got := runNode(t, 13, node, nil, []namedTensor{{"x", x}}, "y")[0]
	lse := func(v ...float64) float32 {
		m := slices.Max(v)
		s := 0.0
		for _, x := range v {
			s += math.Exp(x - m)
		}
		return float32(m + math.Log(s))
	}
	assertClose(t, got, []int{2}, []float32{lse(1, 2, 3), lse(100, 101, 102)})
}

// TestGelu holds ONNX's Gelu to the standard normal CDF's published
// values, Φ(1) = 0.8413447460685429 and Φ(2) = 0.9772498680518208, and to
// the tanh approximation at the same points (PyTorch's
// gelu(approximate="tanh") gives 0.8411920 and 1.9545977).
func TestGelu(t *testing.T) {
	x := &Tensor{Shape: []int{5}, Data: []float32{-2, -1, 0, 1, 2}}
	phi1, phi2 := 0.8413447460685429, 0.9772498680518208
	exact := []float32{float32(-2 * (1 - phi2)), float32(-(1 - phi1)), 0, float32(phi1), float32(2 * phi2)}
	got := runNode(t, 20, pbNode("Gelu", []string{"x"}, []string{"y"}), nil, []namedTensor{{"x", x}}, "y")[0]
	assertClose(t, got, []int{5}, exact)
	tanh := runNode(t, 20, pbNode("Gelu", []string{"x"}, []string{"y"}, pbAttrString("approximate", "tanh")), nil, []namedTensor{{"x", x}}, "y")[0]
	assertClose(t, tanh, []int{5}, []float32{-0.04540229, -0.15880801, 0, 0.84119199, 1.95459771})
}
