package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// The cases of testCUDAOps for the kernels of issue 29 (LayerNormalization,
// Slice, Gather, Gelu, Einsum, Cast): odd sizes, rows longer than a
// reduction block, negative axes, indices and steps, ranks up to 6.

type (
	cudaCheck func(t *testing.T, model []byte, inputs map[string]*Tensor)
	cudaGraph func(opset int64, nodes, inits [][]byte, inputs map[string]*Tensor, outputs ...string) []byte
)

func testCUDALayerNorm(t *testing.T, check cudaCheck, graph cudaGraph) {
	for i, tc := range []struct {
		x     []int
		axis  int64
		bias  bool
		stats bool // the Mean and InvStdDev outputs too
		eps   float32
	}{
		{[]int{2, 3, 5}, -1, true, false, 1e-5},
		{[]int{3, 7, 129}, 1, false, true, 1e-3},
		{[]int{1, 2, 3, 4, 5, 6}, -3, true, true, 1e-5},
		{[]int{4, 1}, 0, true, false, 1e-2},
		{[]int{2, 1030}, -1, true, false, 1e-5},
		{[]int{5, 3}, -2, false, false, 0.5},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			axis := int(tc.axis)
			if axis < 0 {
				axis += len(tc.x)
			}
			norm := toInt64s(tc.x[axis:])
			inits := [][]byte{pbFloatTensor("scale", norm, randomTensor(2, tc.x[axis:]...).Data)}
			in := []string{"x", "scale"}
			if tc.bias {
				inits = append(inits, pbFloatTensor("bias", norm, randomTensor(3, tc.x[axis:]...).Data))
				in = append(in, "bias")
			}
			out := []string{"y"}
			if tc.stats {
				out = append(out, "mean", "inv")
			}
			node := pbNode("LayerNormalization", in, out, pbAttrInt("axis", tc.axis), pbAttrFloat("epsilon", tc.eps))
			inputs := map[string]*Tensor{"x": randomTensor(1, tc.x...)}
			check(t, graph(17, [][]byte{node}, inits, inputs, out...), inputs)
		})
	}
}

func testCUDASlice(t *testing.T, check cudaCheck, graph cudaGraph) {
	for i, tc := range []struct {
		x                         []int
		starts, ends, axes, steps []int64
	}{
		{[]int{4, 5, 6}, []int64{1, -1}, []int64{4, -6}, []int64{0, -1}, []int64{2, -2}},
		{[]int{2, 3, 4, 3, 2, 5}, []int64{0, 2, -1}, []int64{2, -100, 0}, []int64{1, 3, 5}, []int64{1, -1, -2}},
		{[]int{3, 4, 5}, []int64{-1}, []int64{math.MinInt64}, []int64{2}, []int64{-1}},
		{[]int{7, 9}, []int64{1, 2}, []int64{math.MaxInt64, 8}, []int64{0, 1}, []int64{3, 2}},
		{[]int{1, 3, 224, 5}, []int64{0, 100}, []int64{2, 224}, []int64{1, 2}, []int64{1, 1}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			n := int64(len(tc.starts))
			inits := [][]byte{
				pbInt64Tensor("starts", []int64{n}, tc.starts), pbInt64Tensor("ends", []int64{n}, tc.ends),
				pbInt64Tensor("axes", []int64{n}, tc.axes), pbInt64Tensor("steps", []int64{n}, tc.steps),
			}
			// Relu after the slice: a node reading the output on the GPU.
			nodes := [][]byte{
				pbNode("Slice", []string{"x", "starts", "ends", "axes", "steps"}, []string{"s"}),
				pbNode("Relu", []string{"s"}, []string{"y"}),
			}
			inputs := map[string]*Tensor{"x": randomTensor(1, tc.x...)}
			check(t, graph(13, nodes, inits, inputs, "y", "s"), inputs)
		})
	}
}

// pbInt32Tensor is an INT32 initializer.
func pbInt32Tensor(name string, dims []int64, data []int32) []byte {
	raw := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(v))
	}
	return pbTensor(name, dims, 6, raw)
}

func testCUDAGather(t *testing.T, check cudaCheck, graph cudaGraph) {
	for i, tc := range []struct {
		x       []int
		axis    int64
		idxDims []int64
		idx     []int64
		int32   bool
	}{
		{[]int{5, 4, 3}, 1, []int64{2, 2}, []int64{0, -1, 2, 2}, false},
		{[]int{5, 4, 3}, -1, []int64{3}, []int64{2, 0, -3}, true},
		{[]int{5, 4, 3}, 0, []int64{}, []int64{-2}, false},
		{[]int{2, 3, 2, 2, 3, 2}, 3, []int64{3}, []int64{1, 0, 1}, true},
		{[]int{1, 197, 7}, 1, []int64{}, []int64{0}, false},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var idx []byte
			if tc.int32 {
				small := make([]int32, len(tc.idx))
				for j, v := range tc.idx {
					small[j] = int32(v)
				}
				idx = pbInt32Tensor("idx", tc.idxDims, small)
			} else {
				idx = pbInt64Tensor("idx", tc.idxDims, tc.idx)
			}
			nodes := [][]byte{
				pbNode("Gather", []string{"x", "idx"}, []string{"g"}, pbAttrInt("axis", tc.axis)),
				pbNode("Neg", []string{"g"}, []string{"y"}),
			}
			inputs := map[string]*Tensor{"x": randomTensor(1, tc.x...)}
			check(t, graph(13, nodes, [][]byte{idx}, inputs, "y"), inputs)
		})
	}
}

// testCUDAGelu covers both approximations, alone and after a MatMul, and
// a Cast to float of an activation (a view).
func testCUDAGelu(t *testing.T, check cudaCheck, graph cudaGraph) {
	for _, mode := range []string{"none", "tanh"} {
		t.Run(mode, func(t *testing.T) {
			inputs := map[string]*Tensor{"x": randomTensor(1, 3, 7, 11), "a": randomTensor(2, 5, 6)}
			inits := [][]byte{pbFloatTensor("b", []int64{6, 9}, randomTensor(3, 6, 9).Data)}
			nodes := [][]byte{
				pbNode("Gelu", []string{"x"}, []string{"y"}, pbAttrString("approximate", mode)),
				pbNode("MatMul", []string{"a", "b"}, []string{"p"}),
				pbNode("Gelu", []string{"p"}, []string{"q"}, pbAttrString("approximate", mode)),
				pbNode("Cast", []string{"q"}, []string{"z"}, pbAttrInt("to", 1)),
			}
			check(t, graph(20, nodes, inits, inputs, "y", "z"), inputs)
		})
	}
}

func testCUDAEinsum(t *testing.T, check cudaCheck, graph cudaGraph) {
	for i, tc := range []struct {
		eq     string
		shapes [][]int
	}{
		{"bij,bjk->bik", [][]int{{2, 3, 4}, {2, 4, 5}}},
		{"BGHID,BGHJD->BGHIJ", [][]int{{1, 2, 3, 4, 5}, {1, 2, 3, 6, 5}}},
		{"BGHIJ,BGHJD->BGHID", [][]int{{2, 1, 3, 4, 6}, {2, 1, 3, 6, 5}}},
		{"ik,kj->ji", [][]int{{3, 7}, {7, 5}}},
		{"i,i", [][]int{{9}, {9}}},
		{"ij->ji", [][]int{{4, 6}}},
		{"ijk->ki", [][]int{{3, 5, 4}}},
		{"abcdef->fdb", [][]int{{2, 3, 2, 2, 1, 3}}},
		{"bn,anm->bam", [][]int{{3, 4}, {2, 4, 5}}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			inputs := map[string]*Tensor{}
			var in []string
			for j, shape := range tc.shapes {
				name := fmt.Sprintf("x%d", j)
				inputs[name] = randomTensor(uint64(j+1), shape...)
				in = append(in, name)
			}
			node := pbNode("Einsum", in, []string{"y"}, pbAttrString("equation", tc.eq))
			check(t, graph(12, [][]byte{node}, nil, inputs, "y"), inputs)
		})
	}
}

// TestGeluTanhAfterAdd: the CPU session fuses a Relu into the Add (or
// Conv) before it; a tanh Gelu, a unary kernel too, must stay a Gelu.
func TestGeluTanhAfterAdd(t *testing.T) {
	a, b := randomTensor(1, 4, 6), randomTensor(2, 6)
	nodes := [][]byte{
		pbNode("Add", []string{"a", "b"}, []string{"p"}),
		pbNode("Gelu", []string{"p"}, []string{"y"}, pbAttrString("approximate", "tanh")),
	}
	model := pbModel(20, pbGraph(nodes, [][]byte{pbFloatTensor("b", []int64{6}, b.Data)},
		[][]byte{pbValueInfoShape("a", a.Shape)}, [][]byte{pbValueInfo("y")}))
	m, _, err := fromBytes(model, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession(SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(context.Background(), map[string]*Tensor{"a": a})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range a.Data {
		p := float64(x + b.Data[i%6])
		if want, g := geluTanh(p), float64(got["y"].Data[i]); math.Abs(g-want) > 1e-6 {
			t.Fatalf("y[%d] = %g, want Gelu(%g) = %g", i, g, p, want)
		}
	}
}

// testCUDASliceFallback: a slice over nine dimensions that do not merge
// is more than the kernel's Shape8 holds, so it runs on the CPU, says so,
// and still computes the slice.
func testCUDASliceFallback(t *testing.T, open func(*testing.T, *Model) *CUDASession) {
	x := randomTensor(1, 3, 3, 3, 3, 3, 3, 3, 3, 3)
	axes := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}
	inits := [][]byte{
		pbInt64Tensor("starts", []int64{9}, make([]int64, 9)), pbInt64Tensor("ends", []int64{9}, slices.Repeat([]int64{3}, 9)),
		pbInt64Tensor("axes", []int64{9}, axes), pbInt64Tensor("steps", []int64{9}, slices.Repeat([]int64{2}, 9)),
	}
	node := pbNode("Slice", []string{"x", "starts", "ends", "axes", "steps"}, []string{"y"})
	model := pbModel(13, pbGraph([][]byte{node}, inits, [][]byte{pbValueInfoShape("x", x.Shape)}, [][]byte{pbValueInfo("y")}))
	m, _, err := fromBytes(model, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, m)
	fb := s.Fallbacks()
	if len(fb) != 1 || !strings.Contains(fb[0], "slice over 9 merged dimensions (the kernel takes 8)") {
		t.Errorf("fallbacks %q, want the Slice's, for its nine dimensions", fb)
	}
	cudaCompareWithCPU(t, m, s, map[string]*Tensor{"x": x}, 0)
}
