package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/runtime/cuda"
)

// The CUDA executor's tests run twice over: on the GPU (TestCUDAModels,
// TestCUDANodeConformance), skipped where NewCUDASession says there is
// none, and on cuda.Emulator (TestCUDAEmulated), which runs the same
// executor and the same kernel sources on the CPU wherever a C++
// compiler is installed.

// newCUDASessionOrSkip opens a session on the GPU, skipping the test when
// CUDA is unavailable.
func newCUDASessionOrSkip(t *testing.T, m *Model) *CUDASession {
	t.Helper()
	s, err := m.NewCUDASession()
	if errors.Is(err, cuda.ErrUnavailable) {
		t.Skip("no GPU: " + err.Error())
	}
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

// TestCUDAUnavailableMessage: without CUDA, NewCUDASession fails with
// cuda.ErrUnavailable and says what is missing; where no driver is
// installed, that it looked for libcuda.
func TestCUDAUnavailableMessage(t *testing.T) {
	m, _, err := fromBytes(reluModel(13, 2, 3), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewCUDASession()
	if err == nil {
		s.Close()
		t.Skip("CUDA is available here")
	}
	if !errors.Is(err, cuda.ErrUnavailable) {
		t.Fatalf("error does not wrap cuda.ErrUnavailable: %v", err)
	}
	msg := "no GPU: " + err.Error()
	if _, probeErr := cuda.Probe(); probeErr != nil && strings.Contains(probeErr.Error(), "no NVIDIA driver library") {
		for _, want := range []string{"libcuda.so.1", "NewCUDASession"} {
			if !strings.Contains(msg, want) {
				t.Errorf("skip message %q does not mention %s", msg, want)
			}
		}
	}
	t.Log(msg)
}

// cudaRelDiff returns max|got−want| / max|want| over the elements.
func cudaRelDiff(got, want []float32) float64 {
	maxDiff, maxRef := 0.0, 0.0
	for i := range want {
		d := math.Abs(float64(got[i] - want[i]))
		if math.IsNaN(d) && !(math.IsNaN(float64(got[i])) && math.IsNaN(float64(want[i]))) {
			return math.Inf(1)
		}
		if !math.IsNaN(d) {
			maxDiff = math.Max(maxDiff, d)
		}
		maxRef = math.Max(maxRef, math.Abs(float64(want[i])))
	}
	if maxRef == 0 {
		return maxDiff
	}
	return maxDiff / maxRef
}

// cudaCompareWithCPU runs inputs through the CUDA session and a CPU
// session and checks every output within tol, relative to its largest
// element.
func cudaCompareWithCPU(t *testing.T, m *Model, s *CUDASession, inputs map[string]*Tensor, tol float64) {
	t.Helper()
	cpu, err := m.NewSession(SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpu.Run(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Run(context.Background(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range m.Outputs() {
		g, w := got[o.Name], want[o.Name]
		if g == nil || !slices.Equal(g.Shape, w.Shape) {
			t.Fatalf("output %s: got %v, want shape %v", o.Name, g, w.Shape)
		}
		if d := cudaRelDiff(g.Data, w.Data); d > tol {
			t.Errorf("output %s: max|gpu−cpu|/max|cpu| = %.3g, want ≤ %g", o.Name, d, tol)
		}
	}
}

// cudaModelCases are the shared models compared with the CPU runtime.
// On the emulator, resnet50 is skipped under -short and inception_v3 and
// bert_base (about a minute together) run only with
// RULEBOOK_CUDA_EMULATE_ALL=1.
var cudaModelCases = []struct {
	file   string
	weight int // 0: always; 1: not under -short; 2: only with RULEBOOK_CUDA_EMULATE_ALL=1
}{
	{"squeezenet1_1.onnx", 0},
	{"resnet50.onnx", 1},
	{"inception_v3.onnx", 2},
	{"bert_base.onnx", 2},
}

// skipHeavyEmulation skips emulator work of the given weight (see
// cudaModelCases).
func skipHeavyEmulation(t *testing.T, weight int) {
	t.Helper()
	switch {
	case weight >= 1 && testing.Short():
		t.Skip("slow on the emulator; skipped under -short")
	case weight >= 2 && os.Getenv("RULEBOOK_CUDA_EMULATE_ALL") != "1":
		t.Skip("slow on the emulator; set RULEBOOK_CUDA_EMULATE_ALL=1 to run it")
	}
}

// testCUDAModel loads a shared model and compares a session opened by
// open with the CPU on two random inputs (the second Run checks that
// nothing from the first lingers in the reused buffers).
func testCUDAModel(t *testing.T, file string, open func(*testing.T, *Model) *CUDASession) {
	m, _, err := Load(sharedModel(t, file), LoadOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, m)
	if fb := s.Fallbacks(); len(fb) > 0 {
		t.Errorf("nodes ran on the CPU:\n%s", strings.Join(fb, "\n"))
	}
	for seed := range uint64(2) {
		cudaCompareWithCPU(t, m, s, m.RandomInputs(seed+2), 1e-3)
	}
}

// TestCUDAModels runs the shared models on the GPU and compares them with
// the CPU runtime within 1e-3 (relative to the largest output element).
func TestCUDAModels(t *testing.T) {
	for _, tc := range cudaModelCases {
		t.Run(tc.file, func(t *testing.T) {
			testCUDAModel(t, tc.file, newCUDASessionOrSkip)
		})
	}
	t.Run("squeezenet1_1-full reference", func(t *testing.T) {
		path := sharedModel(t, "squeezenet1_1-full.onnx")
		m, _, err := Load(path, LoadOptions{Weights: WeightsFile})
		if err != nil {
			t.Fatal(err)
		}
		s := newCUDASessionOrSkip(t, m)
		set := filepath.Join(filepath.Dir(path), "squeezenet1_1-full_test_data_set_0")
		x := readTensorFile(t, filepath.Join(set, "input_0.pb"))
		want := readTensorFile(t, filepath.Join(set, "output_0.pb"))
		got, err := s.Run(context.Background(), map[string]*Tensor{m.Inputs()[0].Name: x})
		if err != nil {
			t.Fatal(err)
		}
		if d := cudaRelDiff(got[m.Outputs()[0].Name].Data, want.Data); d > 1e-4 {
			t.Errorf("max|gpu−pytorch|/max|pytorch| = %.3g, want ≤ 1e-4", d)
		}
	})
	t.Run("TimeNode", func(t *testing.T) {
		testCUDATimeNode(t, newCUDASessionOrSkip, "squeezenet1_1.onnx", "bert_base.onnx")
	})
	t.Run("no fallbacks", func(t *testing.T) {
		if _, err := cuda.Probe(); errors.Is(err, cuda.ErrUnavailable) {
			t.Skip("no GPU: " + err.Error())
		}
		testCUDANoFallbacks(t, newCUDASessionOrSkip, true)
	})
}

// testCUDATimeNode times one node of every kind of the models.
func testCUDATimeNode(t *testing.T, open func(*testing.T, *Model) *CUDASession, files ...string) {
	for _, file := range files {
		m, _, err := Load(sharedModel(t, file), LoadOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, m)
		seen := map[string]bool{}
		var lines []string
		for _, n := range m.Nodes() {
			if seen[n.Op] {
				continue
			}
			seen[n.Op] = true
			d, err := s.TimeNode(context.Background(), n.Index, 3)
			if err != nil {
				t.Fatal(err)
			}
			if d < 0 {
				t.Errorf("node %d (%s) took %v", n.Index, n.Op, d)
			}
			lines = append(lines, fmt.Sprintf("%s %s %s: %v", n.Op, n.ShapeKey(), n.Params, d))
		}
		t.Logf("%s:\n%s", file, strings.Join(lines, "\n"))
		// The session still runs correctly after timing.
		cudaCompareWithCPU(t, m, s, m.RandomInputs(9), 1e-3)
	}
}

// runConformanceCUDA runs every data set of a node test on a CUDA session
// from open and returns the session's fallbacks.
func runConformanceCUDA(c *conformanceCase, open func(*Model) (*CUDASession, error)) ([]string, error) {
	sets, _ := filepath.Glob(filepath.Join(c.dir, "test_data_set_*"))
	if len(sets) == 0 {
		return nil, fmt.Errorf("no test_data_set_* in %s", c.dir)
	}
	var fallbacks []string
	for _, set := range sets {
		err := func() error {
			m, inputs, err := bindIntegerInputs(c.model, set)
			if err != nil {
				return err
			}
			model, _, err := FromONNX(m, c.dir, LoadOptions{})
			if err != nil {
				return err
			}
			s, err := open(model)
			if err != nil {
				return err
			}
			defer s.Close()
			fallbacks = append(fallbacks, s.Fallbacks()...)
			got, err := s.Run(context.Background(), inputs)
			if err != nil {
				return err
			}
			return compareOutputs(c, set, got)
		}()
		if err != nil {
			return fallbacks, fmt.Errorf("%s: %w", filepath.Base(set), err)
		}
	}
	return fallbacks, nil
}

// testCUDAConformance runs the ONNX node tests that TestONNXNodeConformance
// runs on the CPU, with the same tolerances, skips and raised opsets, and
// checks that nodes of CUDAOps ran on the GPU.
func testCUDAConformance(t *testing.T, open func(*Model) (*CUDASession, error)) {
	root := testfiles.ONNXNodeTests(t)
	gpuOps := map[string]bool{}
	for _, op := range CUDAOps() {
		gpuOps[op] = true
	}
	passed, failed := 0, 0
	for _, c := range conformanceCases(t, root) {
		t.Run(c.name, func(t *testing.T) {
			run := c
			if _, ok := conformanceRaised[c.name]; ok {
				raised := *c
				raised.model = withOpset(c.model, minOpset)
				run = &raised
			}
			fallbacks, err := runConformanceCUDA(run, open)
			if reason, ok := conformanceSkips[c.name]; ok {
				if err == nil {
					t.Errorf("passes although the skip list says: %s", reason)
				}
				t.Skipf("%s (%v)", reason, err)
			}
			if err != nil {
				failed++
				t.Fatal(err)
			}
			passed++
			if gpuOps[c.op] && len(fallbacks) > 0 {
				t.Errorf("%s has a GPU kernel, but nodes ran on the CPU:\n%s", c.op, strings.Join(fallbacks, "\n"))
			}
		})
	}
	t.Logf("%d node tests passed, %d failed", passed, failed)
}

// TestCUDANodeConformance runs the ONNX node tests on the GPU.
func TestCUDANodeConformance(t *testing.T) {
	if _, err := cuda.Probe(); errors.Is(err, cuda.ErrUnavailable) {
		t.Skip("no GPU: " + err.Error())
	}
	// One CUDA context for all cases: sessions borrow it.
	dev, err := cuda.Open()
	if errors.Is(err, cuda.ErrUnavailable) {
		t.Skip("no GPU: " + err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	t.Logf("GPU: %s", dev.Describe())
	testCUDAConformance(t, func(m *Model) (*CUDASession, error) {
		return m.newCUDASession(dev, false, cudaOptions{syncEachNode: true})
	})
}

// TestCUDAEmulated runs the executor on the kernel emulator: every kernel
// source compiled by the host C++ compiler, threads of reduction blocks
// as OS threads, allocations fenced by guard pages.
func TestCUDAEmulated(t *testing.T) {
	emu, err := cuda.OpenEmulator(t.TempDir())
	if errors.Is(err, cuda.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if n := emu.Allocations(); n != 0 {
			t.Errorf("%d emulator allocations outlive their sessions", n)
		}
		if err := emu.Close(); err != nil {
			t.Error(err)
		}
	}()
	open := func(t *testing.T, m *Model, opt cudaOptions) *CUDASession {
		t.Helper()
		s, err := m.newCUDASession(emu, false, opt)
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
	openPlain := func(t *testing.T, m *Model) *CUDASession { return open(t, m, cudaOptions{}) }

	t.Run("ops", func(t *testing.T) { testCUDAOps(t, openPlain) })
	// The convolutions above went to the emulator's Convolver (cuDNN's
	// stand-in); these take im2col + cuBLAS.
	t.Run("ops im2col", func(t *testing.T) {
		testCUDAOps(t, func(t *testing.T, m *Model) *CUDASession { return open(t, m, cudaOptions{im2col: true}) })
	})
	t.Run("models", func(t *testing.T) {
		for _, tc := range cudaModelCases {
			t.Run(tc.file, func(t *testing.T) {
				skipHeavyEmulation(t, tc.weight)
				testCUDAModel(t, tc.file, openPlain)
			})
		}
	})
	t.Run("fallbacks", func(t *testing.T) {
		m, _, err := Load(sharedModel(t, "squeezenet1_1.onnx"), LoadOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, m, cudaOptions{cpuOps: map[string]bool{"Concat": true, "MaxPool": true}, threads: 2})
		counts := map[string]int{}
		for _, n := range m.Nodes() {
			counts[n.Op]++
		}
		fb := s.Fallbacks()
		if len(fb) != counts["Concat"]+counts["MaxPool"] {
			t.Errorf("%d fallbacks, want %d:\n%s", len(fb), counts["Concat"]+counts["MaxPool"], strings.Join(fb, "\n"))
		}
		for _, f := range fb {
			if !strings.Contains(f, "Concat") && !strings.Contains(f, "MaxPool") {
				t.Errorf("unexpected fallback %s", f)
			}
		}
		cudaCompareWithCPU(t, m, s, m.RandomInputs(4), 1e-3)
		if _, err := s.TimeNode(context.Background(), slices.IndexFunc(m.Nodes(), func(n NodeInfo) bool { return n.Op == "Concat" }), 2); err != nil {
			t.Error(err)
		}
	})
	t.Run("no fallbacks", func(t *testing.T) { testCUDANoFallbacks(t, openPlain, false) })
	t.Run("Slice fallback", func(t *testing.T) { testCUDASliceFallback(t, openPlain) })
	t.Run("TimeNode", func(t *testing.T) {
		testCUDATimeNode(t, openPlain, "squeezenet1_1.onnx")
	})
	t.Run("TimeNode bert", func(t *testing.T) {
		skipHeavyEmulation(t, 2)
		testCUDATimeNode(t, openPlain, "bert_base.onnx")
	})
	t.Run("close", func(t *testing.T) {
		m, _, err := fromBytes(reluModel(13, 2, 3), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := emu.Allocations()
		s, err := m.newCUDASession(emu, false, cudaOptions{})
		if err != nil {
			t.Fatal(err)
		}
		during := emu.Allocations()
		if during == before {
			t.Error("the session allocated nothing")
		}
		for seed := range uint64(2) {
			if _, err := s.Run(context.Background(), m.RandomInputs(seed)); err != nil {
				t.Fatal(err)
			}
			if emu.Allocations() != during {
				t.Errorf("Run allocated %d device buffers", emu.Allocations()-during)
			}
		}
		if _, err := s.Run(context.Background(), map[string]*Tensor{"x": NewTensor(3, 2)}); err == nil || !strings.Contains(err.Error(), "has shape [3 2], the model expects [2 3]") {
			t.Errorf("wrong input shape: %v", err)
		}
		if _, err := s.Run(context.Background(), map[string]*Tensor{"x": NewTensor(2, 3), "z": NewTensor(1)}); err == nil || !strings.Contains(err.Error(), `unknown inputs "z"`) {
			t.Errorf("unknown input: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Run(ctx, m.RandomInputs(1)); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Run: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if emu.Allocations() != before {
			t.Errorf("Close left %d allocations", emu.Allocations()-before)
		}
		if _, err := s.Run(context.Background(), m.RandomInputs(1)); err == nil {
			t.Error("Run after Close succeeded")
		}
	})
	t.Run("conformance", func(t *testing.T) {
		testCUDAConformance(t, func(m *Model) (*CUDASession, error) {
			return m.newCUDASession(emu, false, cudaOptions{})
		})
	})
}

// cudaPlannedModels are the models whose every node must run on the GPU:
// the torchvision classifiers that sent nodes to the CPU before issue 29
// (opset 17 exports: shufflenet's 26 Slices, convnext_tiny's 23
// LayerNormalizations, swin_t's 36 Gathers, 29 LayerNormalizations and 82
// Slices, vit_b_16's 37 Gathers and 25 LayerNormalizations) and BERT. On the emulator only the small one runs (swin_t takes over a
// minute there); on a GPU all do.
var cudaPlannedModels = []struct {
	name  string
	run   bool // also run it on the emulator and compare with the CPU
	torch bool // a torchvision export (else a shared model only)
}{
	{"shufflenet_v2_x1_0", true, true},
	{"convnext_tiny", false, true},
	{"swin_t", false, true},
	{"vit_b_16", false, true},
	{"bert_base", false, false},
}

// cudaPlannedModelPath finds a model: ../shared/models/NAME.onnx, else
// for a torchvision classifier NAME/model.onnx of an export (the folder
// RULEBOOK_TORCHVISION_DIR names, or one exported now, except under
// -short). "" when absent.
func cudaPlannedModelPath(t *testing.T, name string, torch bool, export func() string) string {
	shared := filepath.Join(testfiles.SharedDir(), "models", name+".onnx")
	if _, err := os.Stat(shared); err == nil {
		return shared
	}
	if !torch {
		return ""
	}
	dir := os.Getenv("RULEBOOK_TORCHVISION_DIR")
	if dir == "" {
		if testing.Short() {
			t.Skipf("%s.onnx is not in the shared models; exporting it (20–45 s for the four on two cores) is skipped under -short: set RULEBOOK_TORCHVISION_DIR to an export_torchvision.py folder", name)
		}
		dir = export()
	}
	path := filepath.Join(dir, name, "model.onnx")
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

// testCUDANoFallbacks opens each planned model on the backend and checks
// that no node runs on the CPU; the small ones (all of them when whole)
// run against the CPU.
func testCUDANoFallbacks(t *testing.T, open func(*testing.T, *Model) *CUDASession, whole bool) {
	var exported string
	export := func() string {
		if exported == "" {
			var names []string
			for _, tc := range cudaPlannedModels {
				if tc.torch {
					names = append(names, tc.name)
				}
			}
			exported = testfiles.ExportTorchvision(t, names...)
		}
		return exported
	}
	for _, tc := range cudaPlannedModels {
		t.Run(tc.name, func(t *testing.T) {
			path := cudaPlannedModelPath(t, tc.name, tc.torch, export)
			if path == "" {
				t.Skipf("%s.onnx is not in the shared models (nor, for a torchvision classifier, in RULEBOOK_TORCHVISION_DIR)", tc.name)
			}
			m, _, err := Load(path, LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			s := open(t, m)
			if fb := s.Fallbacks(); len(fb) > 0 {
				t.Errorf("%d nodes run on the CPU:\n%s", len(fb), strings.Join(fb, "\n"))
			}
			if tc.run || whole {
				cudaCompareWithCPU(t, m, s, m.RandomInputs(3), 1e-3)
			}
		})
	}
}

// testCUDAOps compares small graphs on the CUDA executor with the CPU:
// the cases the node tests leave out (Conv groups, dilations and batches,
// broadcast batched MatMul, Gemm transposes with a broadcast C, views,
// graph outputs that are inputs, views or listed twice).
func testCUDAOps(t *testing.T, open func(*testing.T, *Model) *CUDASession) {
	check := func(t *testing.T, model []byte, inputs map[string]*Tensor) {
		t.Helper()
		m, _, err := fromBytes(model, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, m)
		if fb := s.Fallbacks(); len(fb) > 0 {
			t.Errorf("fallbacks: %v", fb)
		}
		cudaCompareWithCPU(t, m, s, inputs, 1e-5)
		// Twice: the second Run must not see the first's buffers.
		cudaCompareWithCPU(t, m, s, inputs, 1e-5)
	}
	graphAt := func(opset int64, nodes, inits [][]byte, inputs map[string]*Tensor, outputs ...string) []byte {
		var infos, outInfos [][]byte
		names := make([]string, 0, len(inputs))
		for name := range inputs {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			infos = append(infos, pbValueInfoShape(name, inputs[name].Shape))
		}
		for _, o := range outputs {
			outInfos = append(outInfos, pbValueInfo(o))
		}
		return pbModel(opset, pbGraph(nodes, inits, infos, outInfos))
	}
	graph := func(nodes, inits [][]byte, inputs map[string]*Tensor, outputs ...string) []byte {
		return graphAt(13, nodes, inits, inputs, outputs...)
	}
	t.Run("Conv", func(t *testing.T) {
		for i, tc := range []struct {
			x, w                     []int
			group                    int
			strides, dilations, pads []int
			bias                     bool
		}{
			{[]int{1, 3, 9, 9}, []int{4, 3, 3, 3}, 1, []int{1, 1}, []int{1, 1}, []int{1, 1, 1, 1}, true},
			{[]int{2, 4, 8, 7}, []int{6, 2, 3, 2}, 2, []int{2, 1}, []int{1, 2}, []int{1, 0, 2, 1}, true},
			{[]int{1, 8, 6, 6}, []int{8, 1, 3, 3}, 8, []int{1, 1}, []int{2, 2}, []int{2, 2, 2, 2}, false},
			{[]int{2, 5, 4, 4}, []int{7, 5, 1, 1}, 1, []int{1, 1}, []int{1, 1}, []int{0, 0, 0, 0}, true},
			{[]int{3, 6, 4, 5}, []int{6, 2, 1, 1}, 3, []int{1, 1}, []int{1, 1}, []int{0, 0, 0, 0}, true},
			{[]int{1, 3, 10, 10}, []int{2, 3, 1, 1}, 1, []int{3, 3}, []int{1, 1}, []int{0, 0, 0, 0}, false},
			{[]int{1, 2, 11}, []int{3, 2, 4}, 1, []int{2}, []int{3}, []int{2, 1}, true},
		} {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				x, w := randomTensor(1, tc.x...), randomTensor(2, tc.w...)
				inits := [][]byte{pbFloatTensor("w", toInt64s(tc.w), w.Data)}
				in := []string{"x", "w"}
				if tc.bias {
					inits = append(inits, pbFloatTensor("b", []int64{int64(tc.w[0])}, randomTensor(3, tc.w[0]).Data))
					in = append(in, "b")
				}
				node := pbNode("Conv", in, []string{"y"}, pbAttrInt("group", int64(tc.group)),
					pbAttrInts("strides", toInt64s(tc.strides)...), pbAttrInts("dilations", toInt64s(tc.dilations)...),
					pbAttrInts("pads", toInt64s(tc.pads)...))
				inputs := map[string]*Tensor{"x": x}
				check(t, graph([][]byte{node}, inits, inputs, "y"), inputs)
			})
		}
	})
	t.Run("MatMul", func(t *testing.T) {
		for i, tc := range [][2][]int{
			{{2, 1, 3, 4}, {5, 4, 6}},
			{{3, 4}, {2, 4, 5}},
			{{1, 7, 70, 130}, {130, 200}},
			{{4, 1, 9}, {1, 9, 3}},
			{{1, 12, 16, 8}, {1, 12, 8, 16}},
			{{4}, {2, 4, 3}},
			{{2, 3, 4}, {4}},
			{{4}, {4}},
		} {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				inputs := map[string]*Tensor{"a": randomTensor(1, tc[0]...), "b": randomTensor(2, tc[1]...)}
				check(t, graph([][]byte{pbNode("MatMul", []string{"a", "b"}, []string{"y"})}, nil, inputs, "y"), inputs)
			})
		}
	})
	t.Run("Gemm", func(t *testing.T) {
		for i, tc := range []struct {
			transA, transB int64
			c              []int
		}{{0, 0, []int{5}}, {1, 0, []int{3, 1}}, {0, 1, []int{3, 5}}, {1, 1, nil}, {0, 1, []int{}}} {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				a, b := []int{3, 4}, []int{4, 5}
				if tc.transA == 1 {
					a = []int{4, 3}
				}
				if tc.transB == 1 {
					b = []int{5, 4}
				}
				inputs := map[string]*Tensor{"a": randomTensor(1, a...), "b": randomTensor(2, b...)}
				in := []string{"a", "b"}
				if tc.c != nil {
					inputs["c"] = randomTensor(3, tc.c...)
					in = append(in, "c")
				}
				node := pbNode("Gemm", in, []string{"y"}, pbAttrInt("transA", tc.transA), pbAttrInt("transB", tc.transB),
					pbAttrFloat("alpha", 0.5), pbAttrFloat("beta", 2))
				check(t, graph([][]byte{node}, nil, inputs, "y"), inputs)
			})
		}
	})
	t.Run("pools", func(t *testing.T) {
		x := randomTensor(4, 2, 3, 9, 8)
		inputs := map[string]*Tensor{"x": x}
		for i, node := range [][]byte{
			pbNode("MaxPool", []string{"x"}, []string{"y"}, pbAttrInts("kernel_shape", 3, 2), pbAttrInts("strides", 2, 2),
				pbAttrInts("pads", 1, 0, 1, 1), pbAttrInt("ceil_mode", 1), pbAttrInts("dilations", 1, 2)),
			pbNode("AveragePool", []string{"x"}, []string{"y"}, pbAttrInts("kernel_shape", 3, 3), pbAttrInts("strides", 2, 2),
				pbAttrInts("pads", 1, 1, 1, 1), pbAttrInt("count_include_pad", 1), pbAttrInt("ceil_mode", 1)),
			pbNode("AveragePool", []string{"x"}, []string{"y"}, pbAttrInts("kernel_shape", 3, 3), pbAttrInts("strides", 2, 2),
				pbAttrInts("pads", 1, 1, 1, 1), pbAttrInt("count_include_pad", 0), pbAttrInt("ceil_mode", 1)),
			pbNode("GlobalAveragePool", []string{"x"}, []string{"y"}),
			pbNode("GlobalMaxPool", []string{"x"}, []string{"y"}),
		} {
			t.Run(fmt.Sprint(i), func(t *testing.T) { check(t, graph([][]byte{node}, nil, inputs, "y"), inputs) })
		}
	})
	t.Run("views and outputs", func(t *testing.T) {
		// y1 = Relu(Reshape(x)), y2 = Flatten(y1) (a view that is an
		// output), x itself and y1 twice as outputs, z = Transpose(y1) +
		// Softmax over a middle axis.
		inputs := map[string]*Tensor{"x": randomTensor(5, 2, 3, 4)}
		nodes := [][]byte{
			pbNode("Reshape", []string{"x", "shape"}, []string{"r"}),
			pbNode("Relu", []string{"r"}, []string{"y1"}),
			pbNode("Flatten", []string{"y1"}, []string{"y2"}, pbAttrInt("axis", 2)),
			pbNode("Transpose", []string{"y1"}, []string{"t"}, pbAttrInts("perm", 2, 0, 1)),
			pbNode("Softmax", []string{"t"}, []string{"sm"}, pbAttrInt("axis", 1)),
			pbNode("ReduceMean", []string{"sm"}, []string{"z"}, pbAttrInts("axes", 0, 2), pbAttrInt("keepdims", 0)),
			pbNode("Identity", []string{"x"}, []string{"xi"}),
		}
		inits := [][]byte{pbInt64Tensor("shape", []int64{3}, []int64{4, 3, 2})}
		check(t, graph(nodes, inits, inputs, "y1", "y2", "z", "xi", "y1", "sm"), inputs)
	})
	t.Run("LayerNormalization", func(t *testing.T) { testCUDALayerNorm(t, check, graphAt) })
	t.Run("Slice", func(t *testing.T) { testCUDASlice(t, check, graphAt) })
	t.Run("Gather", func(t *testing.T) { testCUDAGather(t, check, graphAt) })
	t.Run("Gelu", func(t *testing.T) { testCUDAGelu(t, check, graphAt) })
	t.Run("Einsum", func(t *testing.T) { testCUDAEinsum(t, check, graphAt) })
	t.Run("Pad and Concat", func(t *testing.T) {
		inputs := map[string]*Tensor{"x": randomTensor(6, 1, 2, 3, 3), "v": {Shape: []int{}, Data: []float32{-7}}}
		nodes := [][]byte{
			pbNode("Pad", []string{"x", "pads", "v"}, []string{"p"}),
			pbNode("Pad", []string{"x", "pads2"}, []string{"q"}, pbAttrString("mode", "reflect")),
			pbNode("Concat", []string{"p", "q", "p"}, []string{"y"}, pbAttrInt("axis", 1)),
			pbNode("Split", []string{"y"}, []string{"s0", "s1"}, pbAttrInt("axis", 1), pbAttrInts("split", 4, 2)),
			pbNode("Sum", []string{"s0", "x2"}, []string{"z"}),
		}
		inits := [][]byte{
			pbInt64Tensor("pads", []int64{8}, []int64{0, 0, 1, 2, 0, 0, 1, 0}),
			pbInt64Tensor("pads2", []int64{8}, []int64{0, 0, 2, 1, 0, 0, 0, 1}),
			pbFloatTensor("x2", []int64{4, 1, 1}, []float32{1, 2, 3, 4}),
		}
		m := pbModel(11, pbGraph(nodes, inits, [][]byte{pbValueInfoShape("x", []int{1, 2, 3, 3}), pbValueInfoShape("v", []int{})},
			[][]byte{pbValueInfo("z"), pbValueInfo("s1")}))
		check(t, m, inputs)
	})
}

// TestCUDAOps checks CUDAOps against the runtime's operators and the GPU
// plans: every listed op is one the runtime has, and everything but
// Constant and the ops computed at load (foldedOps) is listed.
func TestCUDAOps(t *testing.T) {
	all := map[string]bool{}
	for _, op := range Ops() {
		all[op] = true
	}
	listed := CUDAOps()
	if !slices.IsSorted(listed) {
		t.Error("CUDAOps is not sorted")
	}
	for _, op := range listed {
		if !all[op] {
			t.Errorf("CUDAOps lists %s, which the runtime does not implement", op)
		}
	}
	for op := range all {
		if !slices.Contains(listed, op) && op != "Constant" && !foldedOps[op] {
			t.Errorf("%s has no GPU kernel", op)
		}
	}
	for op := range cudaOps {
		if !all[op] {
			t.Errorf("cudaOps names %s, which is not an operator", op)
		}
	}
	for _, u := range []unaryOp{unaryRelu, unaryHardSigmoid, unaryGeluTanh} {
		if _, ok := cudaUnaryCodes[u]; !ok {
			t.Errorf("unary op %d has no code", u)
		}
	}
	if len(cudaUnaryCodes) != int(unaryGeluTanh)+1 {
		t.Errorf("%d unary codes for %d unary ops", len(cudaUnaryCodes), int(unaryGeluTanh)+1)
	}
	for op := range foldedOps {
		if cudaOps[op] {
			t.Errorf("%s is both folded at load and a GPU op", op)
		}
	}
	if len(cudaReduceCodes) != int(reduceSumSquare)+1 {
		t.Errorf("%d reduce codes for %d reductions", len(cudaReduceCodes), int(reduceSumSquare)+1)
	}
}

// TestCUDARowMajorGemm checks the operand swap on a tiny product by
// evaluating the cuBLAS description with the column-major definition.
func TestCUDARowMajorGemm(t *testing.T) {
	const m, n, k = 2, 3, 4
	a := make([]float32, m*k) // row-major
	b := make([]float32, k*n)
	for i := range a {
		a[i] = float32(i + 1)
	}
	for i := range b {
		b[i] = float32(2*i - 5)
	}
	for _, trans := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		// Store op(A) and op(B) transposed when the flag says so.
		as, bs := a, b
		if trans[0] {
			as = transpose2(a, m, k)
		}
		if trans[1] {
			bs = transpose2(b, k, n)
		}
		g := cudaRowMajorGemm(trans[0], trans[1], m, n, k, 1, 1, 0, 2, 0, 0, 3, 0, 1)
		mem := map[cuda.Ptr][]float32{1: as, 2: bs}
		c := make([]float32, m*n)
		// Column-major evaluation of what cuBLAS would compute.
		at := func(p cuda.Ptr, trans bool, ld, i, j int) float32 {
			if trans {
				return mem[p][j+i*ld]
			}
			return mem[p][i+j*ld]
		}
		for i := range g.M {
			for j := range g.N {
				acc := float32(0)
				for l := range g.K {
					acc += at(g.A, g.TransA, g.LDA, i, l) * at(g.B, g.TransB, g.LDB, l, j)
				}
				c[i+j*g.LDC] = acc
			}
		}
		for i := range m {
			for j := range n {
				want := float32(0)
				for l := range k {
					want += a[i*k+l] * b[l*n+j]
				}
				if c[i*n+j] != want {
					t.Fatalf("trans %v: C[%d,%d] = %v, want %v (gemm %+v)", trans, i, j, c[i*n+j], want, g)
				}
			}
		}
	}
}

// transpose2 returns the r×c row-major matrix x transposed.
func transpose2(x []float32, r, c int) []float32 {
	out := make([]float32, len(x))
	for i := range r {
		for j := range c {
			out[j*r+i] = x[i*c+j]
		}
	}
	return out
}
