package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"rulebook/runtime/cuda"
)

// noLt is the emulator as a GPU without cuBLASLt looks.
type noLt struct{ *cuda.Emulator }

func (noLt) EpilogueError() error {
	return errors.New("CUDA is not available: no cuBLASLt library (tried libcublasLt.so)")
}

// ltUnsupported is the emulator as cuBLASLt looks when it has no kernel
// for an epilogue.
type ltUnsupported struct{ *cuda.Emulator }

func (ltUnsupported) PrepareEpilogue(g *cuda.EpilogueGemm) error {
	return fmt.Errorf("cuda: cublasLtMatmulAlgoGetHeuristic: %w: CUBLAS_STATUS_NOT_SUPPORTED (%s)", cuda.ErrNoEpilogue, g)
}

func openOn(t *testing.T, dev cuda.Backend, model []byte, opt cudaOptions) (*Model, *CUDASession) {
	t.Helper()
	m, _, err := fromBytes(model, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.newCUDASession(dev, false, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return m, s
}

// epilogueCases are products with what may follow them, and how many
// nodes their epilogue should absorb (-1: the product is not fused).
var epilogueCases = []struct {
	name     string
	nodes    [][]byte
	inits    [][]byte
	inputs   map[string]*Tensor
	outputs  []string
	absorbed int
	act      cuda.Activation
	bias     bool
}{
	{
		name: "gemm bias transposed",
		nodes: [][]byte{pbNode("Gemm", []string{"a", "w", "c"}, []string{"y"},
			pbAttrInt("transA", 1), pbAttrInt("transB", 1), pbAttrFloat("alpha", 0.5))},
		inits:  [][]byte{pbFloatTensor("w", []int64{6, 7}, randomTensor(2, 6, 7).Data), pbFloatTensor("c", []int64{6}, randomTensor(3, 6).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 7, 5)}, outputs: []string{"y"},
		absorbed: 0, bias: true,
	},
	{
		name: "gemm bias relu",
		nodes: [][]byte{
			pbNode("Gemm", []string{"a", "w", "c"}, []string{"p"}),
			pbNode("Relu", []string{"p"}, []string{"y"}),
		},
		inits:  [][]byte{pbFloatTensor("w", []int64{7, 6}, randomTensor(2, 7, 6).Data), pbFloatTensor("c", []int64{1, 6}, randomTensor(3, 1, 6).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 5, 7)}, outputs: []string{"y"},
		absorbed: 1, act: cuda.ActRelu, bias: true,
	},
	{
		name: "gemm relu no bias transB",
		nodes: [][]byte{
			pbNode("Gemm", []string{"a", "w"}, []string{"p"}, pbAttrInt("transB", 1)),
			pbNode("Relu", []string{"p"}, []string{"y"}),
		},
		inits:  [][]byte{pbFloatTensor("w", []int64{6, 7}, randomTensor(2, 6, 7).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 5, 7)}, outputs: []string{"y"},
		absorbed: 1, act: cuda.ActRelu,
	},
	{
		name: "matmul add relu",
		nodes: [][]byte{
			pbNode("MatMul", []string{"a", "w"}, []string{"p"}),
			pbNode("Add", []string{"p", "b"}, []string{"q"}),
			pbNode("Relu", []string{"q"}, []string{"y"}),
		},
		inits:  [][]byte{pbFloatTensor("w", []int64{7, 6}, randomTensor(2, 7, 6).Data), pbFloatTensor("b", []int64{6}, randomTensor(3, 6).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 2, 5, 7)}, outputs: []string{"y"},
		absorbed: 2, act: cuda.ActRelu, bias: true,
	},
	{
		name: "matmul bias first, tanh gelu",
		nodes: [][]byte{
			pbNode("MatMul", []string{"a", "w"}, []string{"p"}),
			pbNode("Add", []string{"b", "p"}, []string{"q"}),
			pbNode("Gelu", []string{"q"}, []string{"y"}, pbAttrString("approximate", "tanh")),
		},
		inits:  [][]byte{pbFloatTensor("w", []int64{7, 6}, randomTensor(2, 7, 6).Data), pbFloatTensor("b", []int64{1, 6}, randomTensor(3, 1, 6).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 5, 7)}, outputs: []string{"y"},
		absorbed: 2, act: cuda.ActGeluTanh, bias: true,
	},
	{
		name: "matmul add, erf gelu not fused",
		nodes: [][]byte{
			pbNode("MatMul", []string{"a", "w"}, []string{"p"}),
			pbNode("Add", []string{"p", "b"}, []string{"q"}),
			pbNode("Gelu", []string{"q"}, []string{"y"}),
		},
		inits:  [][]byte{pbFloatTensor("w", []int64{7, 6}, randomTensor(2, 7, 6).Data), pbFloatTensor("b", []int64{6}, randomTensor(3, 6).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 5, 7)}, outputs: []string{"y"},
		absorbed: 1, bias: true,
	},
	{
		name: "gemm full C not fused",
		nodes: [][]byte{
			pbNode("Gemm", []string{"a", "w", "c"}, []string{"p"}),
			pbNode("Relu", []string{"p"}, []string{"y"}),
		},
		inits:  [][]byte{pbFloatTensor("w", []int64{7, 6}, randomTensor(2, 7, 6).Data), pbFloatTensor("c", []int64{5, 6}, randomTensor(3, 5, 6).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 5, 7)}, outputs: []string{"y"},
		absorbed: -1,
	},
	{
		name: "relu input is an output",
		nodes: [][]byte{
			pbNode("MatMul", []string{"a", "w"}, []string{"p"}),
			pbNode("Relu", []string{"p"}, []string{"y"}),
		},
		inits:  [][]byte{pbFloatTensor("w", []int64{7, 6}, randomTensor(2, 7, 6).Data)},
		inputs: map[string]*Tensor{"a": randomTensor(1, 5, 7)}, outputs: []string{"y", "p"},
		absorbed: -1,
	},
}

func epilogueModel(nodes, inits [][]byte, inputs map[string]*Tensor, outputs []string) []byte {
	var ins, outs [][]byte
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range inputs {
			if !yield(k) {
				return
			}
		}
	}) {
		ins = append(ins, pbValueInfoShape(name, inputs[name].Shape))
	}
	for _, o := range outputs {
		outs = append(outs, pbValueInfo(o))
	}
	return pbModel(20, pbGraph(nodes, inits, ins, outs))
}

// TestCUDAEpilogueEmulated: on the emulator, a Gemm's bias, a MatMul's
// bias Add and a Relu or tanh Gelu after either run in the product's
// epilogue: the fused nodes queue no work, nothing falls back, there is
// no note, and the outputs are the CPU runtime's within 1e-5, plainly
// and replayed from a captured graph.
func TestCUDAEpilogueEmulated(t *testing.T) {
	emu := openEmulator(t)
	for _, tc := range epilogueCases {
		t.Run(tc.name, func(t *testing.T) {
			model := epilogueModel(tc.nodes, tc.inits, tc.inputs, tc.outputs)
			m, s := openOn(t, emu, model, cudaOptions{})
			checkEpilogues(t, m, s, tc.absorbed, tc.act, tc.bias)
			if f := s.Fallbacks(); len(f) > 0 {
				t.Errorf("fallbacks: %v", f)
			}
			if n := s.Notes(); len(n) > 0 {
				t.Errorf("notes: %v", n)
			}
			for range 3 { // plain, captured, replayed
				cudaCompareWithCPU(t, m, s, tc.inputs, 1e-5)
			}
			if s.graphs.byShape == nil {
				t.Error("no graph was captured")
			}
		})
	}
}

// checkEpilogues checks the product node's epilogue and that the nodes
// it absorbed queue nothing.
func checkEpilogues(t *testing.T, m *Model, s *CUDASession, absorbed int, act cuda.Activation, bias bool) {
	t.Helper()
	product := m.nodes[0]
	ep := s.epilogues[product]
	if absorbed < 0 {
		if ep != nil || len(s.absorbed) > 0 {
			t.Fatalf("fused %+v, want nothing", ep)
		}
		return
	}
	if ep == nil {
		t.Fatal("the product has no epilogue")
	}
	if len(ep.absorbed) != absorbed || ep.act != act || (ep.gemmBias || ep.bias >= 0) != bias {
		t.Errorf("epilogue absorbs %d nodes, act %s, bias %v; want %d, %s, %v", len(ep.absorbed), ep.act, ep.gemmBias || ep.bias >= 0, absorbed, act, bias)
	}
	for i, n := range m.nodes {
		if _, ok := s.absorbed[n]; ok && s.steps[i] != nil {
			t.Errorf("node %d (%s), fused, queues work", i, n.op)
		}
	}
}

// TestCUDAEpilogueUnavailable: without cuBLASLt, or when it has no
// kernel for an epilogue, products run unfused, a note says why once,
// and the outputs are still the CPU runtime's.
func TestCUDAEpilogueUnavailable(t *testing.T) {
	emu := openEmulator(t)
	for _, dev := range []struct {
		name string
		b    cuda.Backend
		note string
	}{
		{"no cuBLASLt", noLt{emu}, "not fused into the product: CUDA is not available: no cuBLASLt library"},
		{"not supported", ltUnsupported{emu}, "bias and activation unfused: cuda: cublasLtMatmulAlgoGetHeuristic: no fused epilogue"},
	} {
		t.Run(dev.name, func(t *testing.T) {
			tc := epilogueCases[3] // matmul add relu
			model := epilogueModel(tc.nodes, tc.inits, tc.inputs, tc.outputs)
			m, s := openOn(t, dev.b, model, cudaOptions{})
			checkEpilogues(t, m, s, -1, cuda.ActNone, false)
			notes := s.Notes()
			if n := len(slices.DeleteFunc(slices.Clone(notes), func(n string) bool { return !strings.Contains(n, dev.note) })); n != 1 {
				t.Errorf("notes %q: want one with %q", notes, dev.note)
			}
			cudaCompareWithCPU(t, m, s, tc.inputs, 1e-5)
		})
	}
}

// TestCUDAEpilogueTimeNode: the product, timed alone, runs with its
// epilogue, the fused nodes cost nothing.
func TestCUDAEpilogueTimeNode(t *testing.T) {
	emu := openEmulator(t)
	tc := epilogueCases[3]
	_, s := openOn(t, emu, epilogueModel(tc.nodes, tc.inits, tc.inputs, tc.outputs), cudaOptions{})
	for i := range 3 {
		if _, err := s.TimeNode(context.Background(), i, 2); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

// recordingLt is the emulator, recording the epilogue products prepared.
type recordingLt struct {
	*cuda.Emulator
	prepared *[]cuda.EpilogueGemm
}

func (r recordingLt) PrepareEpilogue(g *cuda.EpilogueGemm) error {
	*r.prepared = append(*r.prepared, *g)
	return r.Emulator.PrepareEpilogue(g)
}

// TestCUDAEpiloguePrecision: the session prepares each epilogue product
// once, at plan time, at the session's precision, and a bf16 session
// stays within bfloat16's rounding of the CPU runtime.
func TestCUDAEpiloguePrecision(t *testing.T) {
	emu := openEmulator(t)
	tc := epilogueCases[3] // matmul add relu
	for _, p := range []cuda.Precision{cuda.TF32, cuda.BF16} {
		var prepared []cuda.EpilogueGemm
		m, s := openOn(t, recordingLt{emu, &prepared}, epilogueModel(tc.nodes, tc.inits, tc.inputs, tc.outputs), cudaOptions{precision: p})
		if len(prepared) != 1 || prepared[0].Precision != p || !prepared[0].HasBias || prepared[0].Act != cuda.ActRelu {
			t.Fatalf("%s: prepared %+v", p, prepared)
		}
		for range 3 {
			cudaCompareWithCPU(t, m, s, tc.inputs, 1e-2)
		}
		if len(prepared) != 1 {
			t.Errorf("%s: %d preparations after the runs, want 1", p, len(prepared))
		}
	}
}
