package runtime

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"rulebook/runtime/cuda"
)

// convReluModel is x (batch×3×10×10) → Conv 3×3 with bias, pads 1 →
// Relu → Conv 1×1 → Relu → Add x's first channels… kept small: the
// second Relu's input is also a graph output, so it is not fused.
func convReluModel(batch int) []byte {
	w1 := randomTensor(2, 6, 3, 3, 3)
	b1 := randomTensor(3, 6)
	w2 := randomTensor(4, 3, 6, 1, 1)
	nodes := [][]byte{
		pbNode("Conv", []string{"x", "w1", "b1"}, []string{"c1"}, pbAttrInts("pads", 1, 1, 1, 1)),
		pbNode("Relu", []string{"c1"}, []string{"r1"}),
		pbNode("Conv", []string{"r1", "w2"}, []string{"c2"}),
		pbNode("Relu", []string{"c2"}, []string{"r2"}),
		pbNode("Add", []string{"r2", "x"}, []string{"y"}),
	}
	inits := [][]byte{
		pbFloatTensor("w1", []int64{6, 3, 3, 3}, w1.Data),
		pbFloatTensor("b1", []int64{6}, b1.Data),
		pbFloatTensor("w2", []int64{3, 6, 1, 1}, w2.Data),
	}
	return pbModel(13, pbGraph(nodes, inits,
		[][]byte{pbValueInfoShape("x", []int{batch, 3, 10, 10})},
		[][]byte{pbValueInfo("y"), pbValueInfo("c2")}))
}

// failingCapture is the emulator with a capture that cannot end.
type failingCapture struct{ *cuda.Emulator }

func (f failingCapture) EndCapture() (*cuda.Graph, error) {
	g, err := f.Emulator.EndCapture()
	if err == nil {
		f.Emulator.DestroyGraph(g)
	}
	return nil, errors.New("cuda: cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)")
}

// noCuDNN is the emulator as a GPU without cuDNN looks.
type noCuDNN struct{ *cuda.Emulator }

func (noCuDNN) ConvError() error {
	return errors.New("CUDA is not available: no cuDNN library (tried libcudnn.so.9)")
}

// noAlgorithm is the emulator as cuDNN looks when Find fails.
type noAlgorithm struct{ *cuda.Emulator }

func (noAlgorithm) PrepareConv(*cuda.Convolution) error {
	return errors.New("cuda: cudnnFindConvolutionForwardAlgorithm: CUDNN_STATUS_NOT_SUPPORTED (3000)")
}

// TestCUDAGraphEmulated: a session on the emulator fuses the Relu that
// alone reads a convolution, captures its work on the second Run and
// replays it on the later ones, with the outputs of plain launches each
// time; a model of another batch captures its own graph; a capture that
// fails, or CPU fallbacks, leave plain launches and a note saying why.
func TestCUDAGraphEmulated(t *testing.T) {
	emu := openEmulator(t)
	open := func(t *testing.T, dev cuda.Backend, m *Model, opt cudaOptions) *CUDASession {
		s, err := m.newCUDASession(dev, false, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s
	}
	for _, batch := range []int{1, 3} {
		m, _, err := fromBytes(convReluModel(batch), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		graphs := open(t, emu, m, cudaOptions{})
		plain := open(t, emu, m, cudaOptions{noGraphs: true})
		if n := len(graphs.fusedRelu); n != 2 {
			t.Errorf("%d nodes in fused pairs, want 2 (the first Conv and Relu)", n)
		}
		if notes := graphs.Notes(); len(notes) > 0 {
			t.Errorf("notes: %v", notes)
		}
		if notes := plain.Notes(); !slices.Contains(notes, "no CUDA graph: RULEBOOK_CUDA_GRAPHS=0") {
			t.Errorf("notes without graphs: %v", notes)
		}
		for seed := range uint64(4) {
			inputs := m.RandomInputs(seed)
			want, err := plain.Run(context.Background(), inputs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := graphs.Run(context.Background(), inputs)
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range want {
				if !slices.Equal(got[name].Data, w.Data) {
					t.Fatalf("batch %d, run %d: output %s differs from plain launches", batch, seed, name)
				}
			}
			if seed == 0 {
				cudaCompareWithCPU(t, m, plain, inputs, 1e-5)
			}
			if captured := len(graphs.graphs.byShape); captured != min(int(seed), 1) {
				t.Errorf("batch %d, after run %d: %d graphs", batch, seed, captured)
			}
		}
	}
	t.Run("capture fails", func(t *testing.T) {
		m, _, err := fromBytes(convReluModel(2), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, failingCapture{emu}, m, cudaOptions{})
		for seed := range uint64(3) {
			cudaCompareWithCPU(t, m, s, m.RandomInputs(seed), 1e-5)
		}
		if notes := s.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "no CUDA graph: the capture failed: cuda: cuStreamEndCapture") {
			t.Errorf("notes: %v", notes)
		}
	})
	t.Run("fallbacks", func(t *testing.T) {
		m, _, err := fromBytes(convReluModel(1), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, emu, m, cudaOptions{cpuOps: map[string]bool{"Add": true}})
		for seed := range uint64(3) {
			cudaCompareWithCPU(t, m, s, m.RandomInputs(seed), 1e-5)
		}
		if notes := s.Notes(); len(notes) != 1 || !strings.Contains(notes[0], "1 nodes run on the CPU mid-run") {
			t.Errorf("notes: %v", notes)
		}
	})
	t.Run("no cuDNN", func(t *testing.T) {
		m, _, err := fromBytes(convReluModel(1), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, noCuDNN{emu}, m, cudaOptions{})
		cudaCompareWithCPU(t, m, s, m.RandomInputs(1), 1e-5)
		want := "Conv: im2col + cuBLAS, not cuDNN: CUDA is not available: no cuDNN library (tried libcudnn.so.9)"
		if len(s.fusedRelu) != 0 || !slices.Equal(s.Notes(), []string{want}) {
			t.Errorf("fused %d, notes %v", len(s.fusedRelu), s.Notes())
		}
	})
	t.Run("Find fails", func(t *testing.T) {
		m, _, err := fromBytes(convReluModel(1), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, noAlgorithm{emu}, m, cudaOptions{})
		// The Relu stays fused, so im2col applies it.
		cudaCompareWithCPU(t, m, s, m.RandomInputs(1), 1e-5)
		// One note: both Convs are named Conv_node.
		if notes := s.Notes(); len(s.fusedRelu) != 2 || len(notes) != 1 ||
			!strings.Contains(notes[0], "im2col + cuBLAS, cuDNN failed: cuda: cudnnFindConvolutionForwardAlgorithm: CUDNN_STATUS_NOT_SUPPORTED") {
			t.Errorf("fused %d, notes %v", len(s.fusedRelu), notes)
		}
	})
	t.Run("im2col", func(t *testing.T) {
		m, _, err := fromBytes(convReluModel(1), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, emu, m, cudaOptions{im2col: true})
		cudaCompareWithCPU(t, m, s, m.RandomInputs(1), 1e-5)
		if len(s.fusedRelu) != 0 || !slices.Contains(s.Notes(), "Conv: im2col + cuBLAS, not cuDNN: asked for by the session's options") {
			t.Errorf("fused %d, notes %v", len(s.fusedRelu), s.Notes())
		}
	})
}

// TestCUDAPrecisionEmulated runs convReluModel at TF32 and BF16 on the
// emulator, through its Convolver and through im2col + cuBLAS, against
// the CPU's float32. One product of operands rounded to a p-bit mantissa
// is off by 2u at most (u = 2^-(p+1): 2^-11 for TF32, 2^-8 for BF16);
// over a sum of K such products with random signs the error grows like
// sqrt(K), as the sum itself does, so relative to the outputs' scale it
// stays about 2u. Two products in a row double that; the bound, 16u,
// leaves a margin of 4. The outputs must also differ from float32's,
// else the operands were not rounded.
func TestCUDAPrecisionEmulated(t *testing.T) {
	emu := openEmulator(t)
	m, _, err := fromBytes(convReluModel(2), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inputs := m.RandomInputs(5)
	cpu, err := m.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpu.Run(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []cuda.Precision{cuda.TF32, cuda.BF16} {
		u := math.Ldexp(1, -p.MantissaBits()-1)
		for _, im2col := range []bool{false, true} {
			s, err := m.newCUDASession(emu, false, cudaOptions{precision: p, im2col: im2col})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Run(context.Background(), inputs)
			s.Close()
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range want {
				d := cudaRelDiff(got[name].Data, w.Data)
				t.Logf("%s (im2col %v), output %s: max|Δ|/max|cpu| = %.3g (u = %.3g)", p, im2col, name, d, u)
				if d > 16*u || d < u/64 {
					t.Errorf("%s (im2col %v), output %s: max|Δ|/max|cpu| = %.3g, want within (%.3g, %.3g]", p, im2col, name, d, u/64, 16*u)
				}
			}
		}
	}
}

// TestGPUSharedBySessions: sessions opened on one GPU in turn (as a
// measured search opens one per node it times) each compute what the CPU
// does, give back their buffers when closed, and leave the device open
// for the next.
func TestGPUSharedBySessions(t *testing.T) {
	emu := openEmulator(t)
	gpu := &GPU{dev: emu}
	for batch := 1; batch <= 3; batch++ {
		m, _, err := fromBytes(convReluModel(batch), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s, err := gpu.Open(m, CUDAOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for seed := range uint64(2) {
			cudaCompareWithCPU(t, m, s, m.RandomInputs(seed), 1e-5)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if n := emu.Allocations(); n != 0 {
			t.Errorf("batch %d: %d allocations outlive the session", batch, n)
		}
	}
	if err := gpu.Close(); err != nil {
		t.Fatal(err)
	}
}
