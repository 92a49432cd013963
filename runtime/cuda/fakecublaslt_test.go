package cuda

import (
	"errors"
	"strings"
	"testing"
)

// fakeLtSource adds cuBLASLt: descriptors and layouts are counted while
// live, the heuristic returns the algorithms fake_lt_setup asks for
// (algorithm i+1 needing ws[i] bytes) or NOT_SUPPORTED for one epilogue,
// and cublasLtMatmul checks its algorithm's workspace, then computes the
// product (gemm's at) and the epilogue by definition.
const fakeLtSource = `
#include <math.h>
typedef struct { int compute, ta, tb; unsigned epi; const float* bias; } lt_desc;
typedef struct { int type; unsigned long long rows, cols; long long ld; } lt_layout;
typedef struct { unsigned long long ws; } lt_pref;
typedef struct { unsigned long long algo[8]; size_t ws; int state; float waves; int reserved[4]; } lt_result;
static int lt_token, lt_live, lt_compute, lt_algo_used, lt_heuristics, lt_nalgos = 1;
static unsigned lt_unsupported;
static unsigned long long lt_ws[3];
int fake_lt_live(void) { return lt_live; }
int fake_lt_compute(void) { return lt_compute; }
int fake_lt_algo(void) { return lt_algo_used; }
int fake_lt_heuristics(void) { return lt_heuristics; }
void fake_lt_setup(int n, unsigned long long ws0, unsigned long long ws1, unsigned unsupported) {
  lt_nalgos = n; lt_ws[0] = ws0; lt_ws[1] = ws1; lt_unsupported = unsupported;
}
cublasStatus_t cublasLtCreate(void** h) { FAIL("cublasLtCreate"); if (current != CTX) return 1; *h = &lt_token; lt_live++; return 0; }
cublasStatus_t cublasLtDestroy(void* h) { if (h != &lt_token) return 7; lt_live--; return 0; }
cublasStatus_t cublasLtMatmulDescCreate(lt_desc** d, int compute, int scale) {
  FAIL("cublasLtMatmulDescCreate");
  if (scale != 0) return 7;
  *d = (lt_desc*)calloc(1, sizeof **d); (*d)->compute = compute; (*d)->epi = 1; lt_live++;
  return 0;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(lt_desc* d, int attr, const void* buf, size_t size) {
  switch (attr) {
  case 3: if (size != 4) return 7; d->ta = *(const int*)buf; return 0;
  case 4: if (size != 4) return 7; d->tb = *(const int*)buf; return 0;
  case 7: if (size != 4) return 7; d->epi = *(const unsigned*)buf; return 0;
  case 8: if (size != 8) return 7; d->bias = *(const float* const*)buf; return 0;
  }
  return 7;
}
cublasStatus_t cublasLtMatmulDescDestroy(lt_desc* d) { free(d); lt_live--; return 0; }
cublasStatus_t cublasLtMatrixLayoutCreate(lt_layout** l, int type, unsigned long long rows, unsigned long long cols, long long ld) {
  FAIL("cublasLtMatrixLayoutCreate");
  if (type != 0 || ld < (long long)rows) return 7;
  *l = (lt_layout*)calloc(1, sizeof **l); (*l)->rows = rows; (*l)->cols = cols; (*l)->ld = ld; lt_live++;
  return 0;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(lt_layout* l) { free(l); lt_live--; return 0; }
cublasStatus_t cublasLtMatmulPreferenceCreate(lt_pref** p) { *p = (lt_pref*)calloc(1, sizeof **p); lt_live++; return 0; }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(lt_pref* p, int attr, const void* buf, size_t size) {
  if (attr != 1 || size != 8) return 7;
  p->ws = *(const unsigned long long*)buf;
  return 0;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(lt_pref* p) { free(p); lt_live--; return 0; }
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(void* h, lt_desc* d, lt_layout* a, lt_layout* b, lt_layout* c, lt_layout* dd,
    lt_pref* p, int requested, lt_result* out, int* returned) {
  FAIL("cublasLtMatmulAlgoGetHeuristic");
  if (h != &lt_token || requested < 1 || capturing || p->ws == 0) return 7;
  lt_heuristics++;
  if (d->epi == lt_unsupported) return 15;
  int n = lt_nalgos < requested ? lt_nalgos : requested;
  for (int i = 0; i < n; i++) { memset(&out[i], 0, sizeof out[i]); out[i].algo[0] = i + 1; out[i].ws = lt_ws[i]; }
  *returned = n;
  return 0;
}
static float lt_apply(unsigned epi, float v, float bias) {
  if (epi & 4) v += bias;
  if (epi & 2) v = v > 0 ? v : 0;
  if (epi & 32) v = 0.5f * v * (1 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  return v;
}
cublasStatus_t cublasLtMatmul(void* h, lt_desc* d, const float* alpha, const float* A, lt_layout* ad, const float* B, lt_layout* bd,
    const float* beta, const float* C, lt_layout* cd, float* D, lt_layout* dd, const lt_result* algo, void* ws, size_t wsBytes, CUstream s) {
  FAIL("cublasLtMatmul");
  if (current != CTX || h != &lt_token || s != (CUstream)&stream_token || C != D || cd != dd || *beta != 0) return 7;
  int id = (int)algo->algo[0];
  if (id < 1 || id > 3 || wsBytes < lt_ws[id - 1] || (wsBytes > 0 && ws == NULL)) return 7;
  if ((d->epi & 4) && d->bias == NULL) return 7;
  lt_compute = d->compute; lt_algo_used = id;
  int m = (int)dd->rows, n = (int)dd->cols, k = (int)(d->ta ? ad->rows : ad->cols);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      float acc = 0;
      for (int l = 0; l < k; l++) acc += at(A, d->ta, (int)ad->ld, i, l) * at(B, d->tb, (int)bd->ld, l, j);
      D[i + (long long)j * dd->ld] = lt_apply(d->epi, *alpha * acc, d->bias ? d->bias[i] : 0);
    }
  return 0;
}
`

// ltProblem is a small column-major epilogue product with its operands
// uploaded: op(A) 3×4, op(B) 4×2, small integers so that every
// precision computes it exactly.
type ltProblem struct {
	g    EpilogueGemm
	a, b []float32
	bias []float32
}

func newLtProblem(t *testing.T, c Backend, transA bool, bias bool, act Activation, p Precision) *ltProblem {
	t.Helper()
	const m, n, k = 3, 2, 4
	pr := &ltProblem{a: make([]float32, m*k), b: make([]float32, k*n), bias: []float32{0.5, -7, 2}}
	for i := range pr.a {
		pr.a[i] = float32(i%5) - 2
	}
	for i := range pr.b {
		pr.b[i] = float32(i%3) - 1
	}
	lda := m
	if transA {
		lda = k
	}
	alloc := func(xs []float32) Ptr {
		ptr, err := c.Alloc(4 * len(xs))
		if err != nil {
			t.Fatal(err)
		}
		if err := UploadFloats(c, ptr, xs); err != nil {
			t.Fatal(err)
		}
		return ptr
	}
	pr.g = EpilogueGemm{Gemm: Gemm{TransA: transA, M: m, N: n, K: k, Alpha: 2, A: alloc(pr.a), LDA: lda, B: alloc(pr.b), LDB: k,
		C: alloc(make([]float32, m*n)), LDC: m, Batch: 1, Precision: p}, HasBias: bias, Act: act}
	if bias {
		pr.g.Bias = alloc(pr.bias)
	}
	return pr
}

// want computes the product and the epilogue on the host.
func (pr *ltProblem) want() []float32 {
	g := &pr.g
	d := make([]float32, g.M*g.N)
	for i := range g.M {
		for j := range g.N {
			acc := float32(0)
			for l := range g.K {
				ia := i + l*g.LDA
				if g.TransA {
					ia = l + i*g.LDA
				}
				av := pr.a[ia]
				acc += av * pr.b[l+j*g.LDB]
			}
			d[i+j*g.M] = g.Alpha * acc
		}
	}
	var bias []float32
	if g.HasBias {
		bias = pr.bias
	}
	applyEpilogue(d, g.M, g.N, g.M, bias, g.Act)
	return d
}

func (pr *ltProblem) check(t *testing.T, c Backend) {
	t.Helper()
	got := make([]float32, pr.g.M*pr.g.N)
	if err := DownloadFloats(c, got, pr.g.C); err != nil {
		t.Fatal(err)
	}
	if d := relDiff(got, pr.want()); d > 1e-6 {
		t.Errorf("%s: got %v, want %v", &pr.g, got, pr.want())
	}
}

// TestFakeCUBLASLt: every epilogue and precision computes the fake's
// definition with the compute type the precision asks for; the
// heuristic runs once per shape, an algorithm needing more than
// ltMaxWorkspace is passed over, an unprepared shape cannot be
// captured, and Close leaves no descriptor.
func TestFakeCUBLASLt(t *testing.T) {
	f := useFakeCUDA(t)
	f.ltSetup(2, 1<<40, 4096, 0)
	live := f.ltLive()
	c, err := open(ptxCache{dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EpilogueError(); err != nil {
		t.Fatal(err)
	}
	computes := map[Precision]int32{FP32: 68, TF32: 77, BF16: 75}
	for _, p := range []Precision{FP32, TF32, BF16} {
		for _, act := range []Activation{ActNone, ActRelu, ActGeluTanh} {
			for _, bias := range []bool{false, true} {
				pr := newLtProblem(t, c, act == ActRelu, bias, act, p)
				before := f.ltHeuristics()
				for range 2 {
					if err := c.EpilogueGemm(&pr.g); err != nil {
						t.Fatal(err)
					}
				}
				pr.check(t, c)
				if n := f.ltHeuristics() - before; n != 1 {
					t.Errorf("%s: %d heuristic calls, want 1", &pr.g, n)
				}
				if f.ltCompute() != computes[p] || f.ltAlgo() != 2 {
					t.Errorf("%s: compute type %d, algorithm %d; want %d, 2", &pr.g, f.ltCompute(), f.ltAlgo(), computes[p])
				}
			}
		}
	}
	// A prepared shape is captured; an unprepared one is refused.
	pr := newLtProblem(t, c, true, true, ActRelu, FP32) // prepared in the loop
	c.capturing = true
	err = c.EpilogueGemm(&pr.g)
	pr.g.Act = ActGeluTanh
	c.capturing = false
	if err != nil {
		t.Errorf("a prepared shape while capturing: %v", err)
	}
	c.capturing = true
	err = c.PrepareEpilogue(&pr.g)
	c.capturing = false
	if err == nil || !strings.Contains(err.Error(), "not prepared before the capture") {
		t.Errorf("an unprepared shape while capturing: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if f.ltLive() != live {
		t.Errorf("%d cuBLASLt objects left after Close", f.ltLive()-live)
	}
}

// TestFakeCUBLASLtErrors: no library, a failing handle, heuristic,
// descriptor or product name the call and the shape and leak nothing;
// NOT_SUPPORTED and workspaces that do not fit wrap ErrNoEpilogue.
func TestFakeCUBLASLtErrors(t *testing.T) {
	f := useFakeCUDA(t)
	t.Run("absent", func(t *testing.T) {
		ltLibraries = []string{"libcublasLt-absent.so"}
		defer func() { ltLibraries = []string{f.path} }()
		c := openFakeContext(t)
		err := c.EpilogueError()
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no cuBLASLt library (tried libcublasLt-absent.so") {
			t.Errorf("EpilogueError = %v", err)
		}
		if err := c.PrepareEpilogue(&newLtProblem(t, c, false, true, ActRelu, FP32).g); err == nil {
			t.Error("PrepareEpilogue without cuBLASLt succeeded")
		}
		if !strings.Contains(c.Describe(), "no cuBLASLt") {
			t.Errorf("Describe = %q", c.Describe())
		}
	})
	t.Run("create", func(t *testing.T) {
		f.fail("cublasLtCreate", 1)
		defer f.fail("", 0)
		if err := openFakeContext(t).EpilogueError(); err == nil || !strings.Contains(err.Error(), "cublasLtCreate: CUBLAS_STATUS_NOT_INITIALIZED (1)") {
			t.Errorf("EpilogueError = %v", err)
		}
	})
	for _, tc := range []struct {
		name, call, want string
		rc               int32
		setup            [4]uint64 // algorithms, their workspaces, an unsupported epilogue
		noEpilogue       bool
	}{
		{"heuristic", "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_INTERNAL_ERROR (14) (relu(A·B + bias) m=3", 14, [4]uint64{1, 0, 0, 0}, false},
		{"descriptor", "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutCreate(A): CUBLAS_STATUS_ALLOC_FAILED (3)", 3, [4]uint64{1, 0, 0, 0}, false},
		{"matmul", "cublasLtMatmul", "cublasLtMatmul: CUBLAS_STATUS_EXECUTION_FAILED (13) (relu(A·B + bias) m=3 n=2 k=4", 13, [4]uint64{1, 0, 0, 0}, false},
		{"not supported", "", "CUBLAS_STATUS_NOT_SUPPORTED (relu(A·B + bias)", 0, [4]uint64{1, 0, 0, 6}, true},
		{"workspace too large", "", "no algorithm within 33554432 bytes of workspace", 0, [4]uint64{1, 1 << 40, 0, 0}, true},
		{"no algorithm", "", "no algorithm within", 0, [4]uint64{0, 0, 0, 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.ltSetup(int32(tc.setup[0]), tc.setup[1], tc.setup[2], uint32(tc.setup[3]))
			defer f.ltSetup(1, 0, 0, 0)
			c := openFakeContext(t)
			pr := newLtProblem(t, c, false, true, ActRelu, FP32)
			if tc.call == "cublasLtMatmul" {
				if err := c.PrepareEpilogue(&pr.g); err != nil {
					t.Fatal(err)
				}
			}
			live := f.ltLive()
			f.fail(tc.call, tc.rc)
			defer f.fail("", 0)
			err := c.EpilogueGemm(&pr.g)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrNoEpilogue) != tc.noEpilogue {
				t.Errorf("EpilogueGemm: %v\nwant %s (ErrNoEpilogue %v)", err, tc.want, tc.noEpilogue)
			}
			if f.ltLive() != live {
				t.Errorf("%d descriptors left by the failure", f.ltLive()-live)
			}
		})
	}
	t.Run("workspace allocation", func(t *testing.T) {
		f.ltSetup(1, 64, 0, 0)
		defer f.ltSetup(1, 0, 0, 0)
		c := openFakeContext(t)
		pr := newLtProblem(t, c, false, false, ActRelu, FP32)
		f.allocLimit(8)
		defer f.allocLimit(1 << 32)
		err := c.PrepareEpilogue(&pr.g)
		if !errors.Is(err, ErrNoEpilogue) || !strings.Contains(err.Error(), "no cuBLASLt workspace for relu(A·B) m=3") {
			t.Errorf("PrepareEpilogue: %v", err)
		}
	})
}

// TestEmulatorEpilogue: the emulator computes the same definition.
func TestEmulatorEpilogue(t *testing.T) {
	e, err := OpenEmulator(t.TempDir())
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, act := range []Activation{ActNone, ActRelu, ActGeluTanh} {
		for _, trans := range []bool{false, true} {
			pr := newLtProblem(t, e, trans, !trans, act, FP32)
			if err := e.PrepareEpilogue(&pr.g); err != nil {
				t.Fatal(err)
			}
			if err := e.EpilogueGemm(&pr.g); err != nil {
				t.Fatal(err)
			}
			pr.check(t, e)
		}
	}
	bad := newLtProblem(t, e, false, true, ActRelu, FP32)
	bad.g.Beta = 1
	if err := e.EpilogueGemm(&bad.g); err == nil {
		t.Error("beta 1 accepted")
	}
}

// TestLtEpilogue: cublasLtEpilogue_t's values (cublasLt.h).
func TestLtEpilogue(t *testing.T) {
	for _, tc := range []struct {
		bias bool
		act  Activation
		want uint32
	}{
		{false, ActNone, 1}, {true, ActNone, 4}, {false, ActRelu, 2}, {true, ActRelu, 6},
		{false, ActGeluTanh, 32}, {true, ActGeluTanh, 36},
	} {
		if got := ltEpilogue(tc.bias, tc.act); got != tc.want {
			t.Errorf("bias %v, %s: %d, want %d", tc.bias, tc.act, got, tc.want)
		}
	}
}
