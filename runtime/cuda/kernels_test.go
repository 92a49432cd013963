package cuda

import (
	"errors"
	"math"
	"testing"
)

// openEmulator returns an emulator, skipping where there is no C++
// compiler.
func openEmulator(t *testing.T) *Emulator {
	t.Helper()
	e, err := OpenEmulator(t.TempDir())
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// forEachBackend runs f on the emulator and, where there is one, the GPU.
func forEachBackend(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Run("emulator", func(t *testing.T) { f(t, openEmulator(t)) })
	t.Run("gpu", func(t *testing.T) {
		c, err := Open()
		if errors.Is(err, ErrUnavailable) {
			t.Skip("no GPU: " + err.Error())
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		})
		t.Logf("GPU: %s", c.Describe())
		f(t, c)
	})
}

func upload(t *testing.T, b Backend, data []float32) Ptr {
	t.Helper()
	p, err := b.Alloc(4 * max(len(data), 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := UploadFloats(b, p, data); err != nil {
		t.Fatal(err)
	}
	return p
}

func download(t *testing.T, b Backend, p Ptr, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := DownloadFloats(b, out, p); err != nil {
		t.Fatal(err)
	}
	return out
}

func launch(t *testing.T, b Backend, src *Source, name string, grid, block uint32, args *Args) {
	t.Helper()
	f, err := b.Function(src, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Launch(f, Dim3{grid, 1, 1}, Dim3{block, 1, 1}, args); err != nil {
		t.Fatal(err)
	}
	if err := b.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

func near(a, b float32) bool {
	return math.Abs(float64(a-b)) <= 1e-5+1e-5*math.Abs(float64(b)) || (a != a && b != b)
}

// TestBuildEverySource compiles every kernel source: with NVRTC on the
// GPU, and on the emulator with the host compiler (-Wall -Wextra
// -Werror), the nearest a machine without CUDA gets to compiling the CUDA
// C.
func TestBuildEverySource(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e Backend) {
		for _, src := range Sources() {
			for _, name := range KernelNames[src] {
				f, err := e.Function(src, name)
				if err != nil {
					t.Fatal(err)
				}
				decl, _ := src.Kernel(name)
				if len(f.Params) != len(decl.Params) || f.Syncs != decl.Syncs {
					t.Errorf("%s: function %+v does not match its declaration", name, f)
				}
			}
		}
	})
}

func TestKernelBinaryBroadcast(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e Backend) {
		// a [2,3] + b [3] -> [2,3]: dims {2,3}, a strides {3,1}, b {0,1}.
		a := upload(t, e, []float32{1, 2, 3, 4, 5, 6})
		b := upload(t, e, []float32{10, 20, 30})
		y := upload(t, e, make([]float32, 6))
		args := NewArgs().Ptr(a).Ptr(b).Ptr(y).I64(6).I32(BinaryAdd).I32(2).Shape([]int{2, 3}).Shape([]int{3, 1}).Shape([]int{0, 1})
		launch(t, e, Elementwise, KernelBinary, 1, 4, args) // 4 threads: the grid-stride loop wraps
		want := []float32{11, 22, 33, 14, 25, 36}
		for i, v := range download(t, e, y, 6) {
			if v != want[i] {
				t.Fatalf("element %d = %v, want %v", i, v, want[i])
			}
		}
		// NaN propagates through max as in Go.
		nan := float32(math.NaN())
		x := upload(t, e, []float32{nan, 1, -2})
		launch(t, e, Elementwise, KernelBinary, 1, 32, NewArgs().Ptr(x).Ptr(b).Ptr(y).I64(3).I32(BinaryMax).I32(1).Shape([]int{3}).Shape([]int{1}).Shape([]int{1}))
		got := download(t, e, y, 3)
		if got[0] == got[0] || got[1] != 20 || got[2] != 30 {
			t.Errorf("max = %v", got)
		}
	})
}

func TestKernelUnary(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e Backend) {
		in := []float32{-2, -0.5, 0, 0.5, 2}
		x := upload(t, e, in)
		y := upload(t, e, make([]float32, len(in)))
		for _, tc := range []struct {
			op   int
			a, b float32
			f    func(float64) float64
		}{
			{UnaryRelu, 0, 0, func(v float64) float64 { return math.Max(v, 0) }},
			{UnaryErf, 0, 0, math.Erf},
			{UnarySigmoid, 0, 0, func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }},
			{UnaryLeakyRelu, 0.1, 0, func(v float64) float64 { return map[bool]float64{true: 0.1 * v, false: v}[v < 0] }},
			{UnaryHardSigmoid, 0.2, 0.5, func(v float64) float64 { return math.Max(0, math.Min(1, 0.2*v+0.5)) }},
			{UnaryRound, 0, 0, math.RoundToEven},
			{UnaryScale, 3, 0, func(v float64) float64 { return 3 * v }},
		} {
			launch(t, e, Elementwise, KernelUnary, 2, 2, NewArgs().Ptr(x).Ptr(y).I64(len(in)).I32(tc.op).F32(tc.a).F32(tc.b))
			for i, v := range download(t, e, y, len(in)) {
				if want := float32(tc.f(float64(in[i]))); !near(v, want) {
					t.Errorf("op %d of %v = %v, want %v", tc.op, in[i], v, want)
				}
			}
		}
	})
}

// TestEmulatorReductions runs the kernels that synchronise: threads of a
// block really run concurrently under the emulator.
func TestKernelReductions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e Backend) {
		// Softmax over rows of a 3×70 matrix (more elements than threads).
		const rows, cols = 3, 70
		in := make([]float32, rows*cols)
		for i := range in {
			in[i] = float32(i%17) / 5
		}
		x := upload(t, e, in)
		y := upload(t, e, make([]float32, len(in)))
		launch(t, e, Reduce, KernelSoftmax, rows, 32, NewArgs().Ptr(x).Ptr(y).I64(cols).I64(1).I32(0))
		got := download(t, e, y, len(in))
		for r := range rows {
			m, sum := math.Inf(-1), 0.0
			for c := range cols {
				m = math.Max(m, float64(in[r*cols+c]))
			}
			for c := range cols {
				sum += math.Exp(float64(in[r*cols+c]) - m)
			}
			for c := range cols {
				if want := float32(math.Exp(float64(in[r*cols+c])-m) / sum); !near(got[r*cols+c], want) {
					t.Fatalf("softmax[%d,%d] = %v, want %v", r, c, got[r*cols+c], want)
				}
			}
		}
		// ReduceSum over axis 0 of the 3×70 matrix: kept dims {70} stride 1,
		// gathered offsets {0, 70, 140}.
		table, err := e.Alloc(3 * 8)
		if err != nil {
			t.Fatal(err)
		}
		if err := UploadInt64s(e, table, []int64{0, 70, 140}); err != nil {
			t.Fatal(err)
		}
		launch(t, e, Reduce, KernelReduce, cols, 32, NewArgs().Ptr(x).Ptr(y).I64(rows).I32(ReduceSum).I32(1).
			Shape([]int{cols}).Shape([]int{1}).Ptr(table))
		got = download(t, e, y, cols)
		for c := range cols {
			if want := in[c] + in[cols+c] + in[2*cols+c]; !near(got[c], want) {
				t.Fatalf("sum[%d] = %v, want %v", c, got[c], want)
			}
		}
		// Global average and maximum of each row.
		for _, kind := range []int{PoolAverage, PoolMax} {
			launch(t, e, Pool, KernelGlobalPool, rows, 16, NewArgs().Ptr(x).Ptr(y).I64(cols).I32(kind))
			got = download(t, e, y, rows)
			for r := range rows {
				want := 0.0
				if kind == PoolMax {
					want = math.Inf(-1)
				}
				for c := range cols {
					if kind == PoolMax {
						want = math.Max(want, float64(in[r*cols+c]))
					} else {
						want += float64(in[r*cols+c]) / cols
					}
				}
				if !near(got[r], float32(want)) {
					t.Errorf("global pool %d of row %d = %v, want %v", kind, r, got[r], want)
				}
			}
		}
	})
}

func TestKernelPad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e Backend) {
		// [1,2,3] reflect-padded by 2 on the left and 1 on the right.
		x := upload(t, e, []float32{1, 2, 3})
		y := upload(t, e, make([]float32, 6))
		for mode, want := range map[int][]float32{
			PadReflect:  {3, 2, 1, 2, 3, 2},
			PadEdge:     {1, 1, 1, 2, 3, 3},
			PadConstant: {9, 9, 1, 2, 3, 9},
		} {
			launch(t, e, Layout, KernelPad, 1, 32, NewArgs().Ptr(x).Ptr(y).I64(6).I32(1).I32(mode).F32(9).Ptr(0).
				Shape([]int{3}).Shape([]int{6}).Shape([]int{2}))
			for i, v := range download(t, e, y, 6) {
				if v != want[i] {
					t.Errorf("mode %d: element %d = %v, want %v", mode, i, v, want[i])
				}
			}
		}
	})
}

// TestEmulatorGemm checks the emulated cuBLAS against the column-major
// definition, with transposes, batches, a broadcast operand and beta = 0
// ignoring a NaN-filled C.
func TestKernelGemm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e Backend) {
		const m, n, k, batch = 3, 4, 5, 2
		data := func(size int, seed float32) []float32 {
			out := make([]float32, size)
			for i := range out {
				out[i] = seed + float32(i%7) - 3
			}
			return out
		}
		for _, trans := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			ta, tb := trans[0], trans[1]
			lda, ldb := m, k
			if ta {
				lda = k
			}
			if tb {
				ldb = n
			}
			aHost, bHost := data(batch*m*k, 0.5), data(k*n, -0.25)
			a, b := upload(t, e, aHost), upload(t, e, bHost)
			cInit := make([]float32, batch*m*n)
			for i := range cInit {
				cInit[i] = float32(math.NaN())
			}
			c := upload(t, e, cInit)
			g := &Gemm{TransA: ta, TransB: tb, M: m, N: n, K: k, Alpha: 2, Beta: 0, A: a, LDA: lda, StrideA: m * k,
				B: b, LDB: ldb, StrideB: 0, C: c, LDC: m, StrideC: m * n, Batch: batch}
			if err := e.Gemm(g); err != nil {
				t.Fatal(err)
			}
			got := download(t, e, c, batch*m*n)
			for bi := range batch {
				for i := range m {
					for j := range n {
						want := 0.0
						for l := range k {
							ai, bj := bi*m*k+i+l*lda, l+j*ldb
							if ta {
								ai = bi*m*k + l + i*lda
							}
							if tb {
								bj = j + l*ldb
							}
							av, bv := aHost[ai], bHost[bj]
							want += float64(av) * float64(bv)
						}
						if g := got[bi*m*n+i+j*m]; !near(g, float32(2*want)) {
							t.Fatalf("trans %v: C[%d](%d,%d) = %v, want %v", trans, bi, i, j, g, 2*want)
						}
					}
				}
			}
		}
	})
}

func TestEmulatorRejectsBadLaunches(t *testing.T) {
	e := openEmulator(t)
	x := upload(t, e, make([]float32, 4))
	f, err := e.Function(Elementwise, KernelFill)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(f, Dim3{1, 1, 1}, Dim3{32, 1, 1}, NewArgs().Ptr(x).I32(4).F32(1)); err == nil {
		t.Error("an int where the kernel takes a long long was accepted")
	}
	if err := e.Launch(f, Dim3{1, 1, 1}, Dim3{32, 1, 1}, NewArgs().Ptr(x+0x100000).I64(4).F32(1)); err == nil {
		t.Error("a pointer outside every allocation was accepted")
	}
	if err := e.Free(x); err != nil {
		t.Fatal(err)
	}
	if e.Allocations() != 0 {
		t.Errorf("%d allocations left", e.Allocations())
	}
}
