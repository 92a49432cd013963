package cuda

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// fakeGraphSource extends the fake driver with stream capture: launches
// of rb_fill while capturing are recorded (cuLaunchKernel), and
// cuGraphLaunch replays them. fake_fail makes one named entry point
// (of the driver or cuDNN) fail with a given code.
const fakeGraphSource = `
static char fail_name[64];
static int fail_rc;
void fake_fail(const char* name, int rc) { snprintf(fail_name, sizeof fail_name, "%s", name); fail_rc = rc; }
#define FAIL(n) do { if (strcmp(fail_name, n) == 0) return fail_rc; } while (0)

typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphExec_st* CUgraphExec;
struct CUgraph_st { struct fill fills[16]; int n; };
struct CUgraphExec_st { CUgraph g; };
static int live_graphs;
int fake_live_graphs(void) { return live_graphs; }

CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
  NEED_CTX; FAIL("cuStreamBeginCapture_v2");
  if (s != (CUstream)&stream_token || mode != 2 || capturing) return 1;
  capturing = 1; ncaptured = 0;
  return 0;
}
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) {
  NEED_CTX;
  if (s != (CUstream)&stream_token || !capturing) return 1;
  capturing = 0;
  FAIL("cuStreamEndCapture");
  CUgraph graph = (CUgraph)calloc(1, sizeof *graph);
  memcpy(graph->fills, captured, sizeof captured);
  graph->n = ncaptured;
  live_graphs++;
  *g = graph;
  return 0;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long flags) {
  NEED_CTX; FAIL("cuGraphInstantiateWithFlags");
  if (flags != 0) return 1;
  CUgraphExec exec = (CUgraphExec)calloc(1, sizeof *exec);
  exec->g = g;
  live_graphs++;
  *e = exec;
  return 0;
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
  NEED_CTX; FAIL("cuGraphLaunch");
  if (s != (CUstream)&stream_token || capturing) return 1;
  for (int i = 0; i < e->g->n; i++)
    for (long long j = 0; j < e->g->fills[i].n; j++) e->g->fills[i].y[j] = e->g->fills[i].v;
  return 0;
}
CUresult cuGraphExecDestroy(CUgraphExec e) { NEED_CTX; free(e); live_graphs--; return 0; }
CUresult cuGraphDestroy(CUgraph g) { NEED_CTX; free(g); live_graphs--; return 0; }
`

// fakeMathSource adds cuBLAS's math mode and the Ex products, which
// record the compute type and check the data types before computing
// the definition (gemm, of fakeCUDASource).
const fakeMathSource = `
static int blas_math, gemm_compute;
int fake_blas_math(void) { return blas_math; }
int fake_gemm_compute(void) { return gemm_compute; }
cublasStatus_t cublasSetMathMode(cublasHandle_t h, int mode) { if (h != (cublasHandle_t)&blas_token) return 1; blas_math = mode; return 0; }
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const float* alpha, const float* A, int at, int lda, const float* B, int bt, int ldb, const float* beta,
    float* C, int ct, int ldc, int compute, int algo) {
  if (at != 0 || bt != 0 || ct != 0 || algo != -1) return 7;
  gemm_compute = compute;
  return gemm(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const float* alpha, const float* A, int at, int lda, long long sa, const float* B, int bt, int ldb, long long sb,
    const float* beta, float* C, int ct, int ldc, long long sc, int batch, int compute, int algo) {
  if (at != 0 || bt != 0 || ct != 0 || algo != -1) return 7;
  gemm_compute = compute;
  return gemm(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
`

// fakeCUDNNSource is a stand-in for libcudnn's legacy convolution API,
// written against cuDNN's documented prototypes: descriptors keep what
// they are set to, cudnnFindConvolutionForwardAlgorithm offers algorithm
// 6 needing 1 TiB of workspace (which the fake cuMemAlloc refuses), 1
// needing 4 KiB and 0 needing 16 bytes, and the forward calls compute
// the convolution's definition in C, checking that the workspace passed
// is the one the algorithm needs.
const fakeCUDNNSource = `
typedef int cudnnStatus_t;
typedef struct { CUstream stream; } *cudnnHandle_t;
typedef struct { int n, c, h, w, format, type; } *cudnnTensorDescriptor_t;
typedef struct { int k, c, h, w, format, type; } *cudnnFilterDescriptor_t;
typedef struct { int ph, pw, sh, sw, dh, dw, mode, type, groups, math; } *cudnnConvolutionDescriptor_t;
typedef struct { int mode, nan; double coef; } *cudnnActivationDescriptor_t;
typedef struct { int algo, status; float time; size_t memory; int determinism, mathType, reserved[3]; } cudnnConvolutionFwdAlgoPerf_t;

static size_t cudnn_version = 90100;
static int cudnn_live, find_calls;
void fake_cudnn_version(size_t v) { cudnn_version = v; }
int fake_cudnn_live(void) { return cudnn_live; }
int fake_find_calls(void) { return find_calls; }
size_t cudnnGetVersion(void) { return cudnn_version; }
const char* cudnnGetErrorString(cudnnStatus_t s) {
  switch (s) {
  case 0: return "CUDNN_STATUS_SUCCESS";
  case 2000: return "CUDNN_STATUS_BAD_PARAM";
  case 3000: return "CUDNN_STATUS_NOT_SUPPORTED";
  case 4000: return "CUDNN_STATUS_INTERNAL_ERROR";
  }
  return "CUDNN_STATUS_UNKNOWN";
}
#define NEW(p) do { FAIL(__func__); *(p) = calloc(1, sizeof **(p)); cudnn_live++; return 0; } while (0)
#define DEL(p) do { if (!(p)) return 2000; free(p); cudnn_live--; return 0; } while (0)
cudnnStatus_t cudnnCreate(cudnnHandle_t* h) { if (current != CTX) return 1001; NEW(h); }
cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { DEL(h); }
cudnnStatus_t cudnnSetStream(cudnnHandle_t h, CUstream s) { h->stream = s; return 0; }
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) { NEW(d); }
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) { DEL(d); }
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) { NEW(d); }
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) { DEL(d); }
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) { NEW(d); }
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) { DEL(d); }
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* d) { NEW(d); }
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) { DEL(d); }
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, int format, int type, int n, int c, int h, int w) {
  if (format != 0 || type != 0 || n < 1 || c < 1 || h < 1 || w < 1) return 2000;
  d->n = n; d->c = c; d->h = h; d->w = w; d->format = format; d->type = type; return 0;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, int type, int format, int k, int c, int h, int w) {
  if (format != 0 || type != 0 || k < 1 || c < 1 || h < 1 || w < 1) return 2000;
  d->k = k; d->c = c; d->h = h; d->w = w; d->format = format; d->type = type; return 0;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int ph, int pw, int sh, int sw, int dh, int dw, int mode, int type) {
  if (ph < 0 || pw < 0 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || mode != 1 || type != 0) return 2000;
  d->ph = ph; d->pw = pw; d->sh = sh; d->sw = sw; d->dh = dh; d->dw = dw; d->mode = mode; d->type = type; d->groups = 1; return 0;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int g) { if (g < 1) return 2000; d->groups = g; return 0; }
static int conv_math = -1;
int fake_conv_math(void) { return conv_math; }
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, int m) { if (m < 0 || m > 3) return 2000; d->math = conv_math = m; return 0; }
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, int mode, int nan, double coef) {
  if (mode != 1 || nan != 0 || coef != 0) return 2000;
  d->mode = mode; d->nan = nan; d->coef = coef; return 0;
}
static int out_dim(int in, int k, int p, int s, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }
cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w, int* n, int* k, int* h, int* wd) {
  if (x->c != w->c * c->groups || w->k % c->groups != 0) return 2000;
  *n = x->n; *k = w->k; *h = out_dim(x->h, w->h, c->ph, c->sh, c->dh); *wd = out_dim(x->w, w->w, c->pw, c->sw, c->dw);
  return 0;
}
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int* n) { *n = 8; return 0; }
static size_t algo_memory(int algo) { return algo == 6 ? (size_t)1 << 40 : algo == 1 ? 4096 : algo == 0 ? 16 : 0; }
cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int requested, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
  FAIL("cudnnFindConvolutionForwardAlgorithm");
  if (current != CTX || h->stream != (CUstream)&stream_token || requested < 4) return 2000;
  find_calls++;
  int algos[4] = {6, 1, 0, 2}, status[4] = {0, 0, 0, 3000};
  for (int i = 0; i < 4; i++) {
    memset(&perf[i], 0, sizeof perf[i]);
    perf[i].algo = algos[i]; perf[i].status = status[i]; perf[i].time = 0.1f * (i + 1); perf[i].memory = algo_memory(algos[i]);
    perf[i].determinism = 1; perf[i].mathType = c->math; perf[i].reserved[2] = -1;
  }
  *returned = 4;
  return 0;
}
static cudnnStatus_t conv(cudnnHandle_t h, float alpha, cudnnTensorDescriptor_t xd, const float* x, cudnnFilterDescriptor_t wd, const float* w,
    cudnnConvolutionDescriptor_t c, int algo, void* ws, size_t wsBytes, cudnnTensorDescriptor_t yd, float* y, const float* bias, int relu, float beta) {
  if (current != CTX || h->stream != (CUstream)&stream_token) return 1001;
  if (wsBytes < algo_memory(algo) || (algo_memory(algo) > 0 && ws == 0) || (algo != 0 && algo != 1 && algo != 6)) return 2000;
  if (yd->n != xd->n || yd->c != wd->k || yd->h != out_dim(xd->h, wd->h, c->ph, c->sh, c->dh) || yd->w != out_dim(xd->w, wd->w, c->pw, c->sw, c->dw)) return 2000;
  int cg = wd->c, kg = wd->k / c->groups;
  for (int n = 0; n < yd->n; n++)
    for (int k = 0; k < yd->c; k++)
      for (int p = 0; p < yd->h; p++)
        for (int q = 0; q < yd->w; q++) {
          double acc = 0;
          for (int ch = 0; ch < cg; ch++)
            for (int r = 0; r < wd->h; r++)
              for (int s = 0; s < wd->w; s++) {
                int i = p * c->sh - c->ph + r * c->dh, j = q * c->sw - c->pw + s * c->dw;
                if (i < 0 || i >= xd->h || j < 0 || j >= xd->w) continue;
                acc += (double)x[((n * xd->c + k / kg * cg + ch) * xd->h + i) * xd->w + j] * w[((k * cg + ch) * wd->h + r) * wd->w + s];
              }
          float* out = &y[((n * yd->c + k) * yd->h + p) * yd->w + q];
          float v = alpha * (float)acc + (beta != 0 ? beta * *out : 0);
          if (bias) v += bias[k];
          if (relu && v < 0) v = 0;
          *out = v;
        }
  return 0;
}
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const float* alpha, cudnnTensorDescriptor_t xd, const float* x,
    cudnnFilterDescriptor_t wd, const float* w, cudnnConvolutionDescriptor_t c, int algo, void* ws, size_t wsBytes,
    const float* beta, cudnnTensorDescriptor_t yd, float* y) {
  FAIL("cudnnConvolutionForward");
  return conv(h, *alpha, xd, x, wd, w, c, algo, ws, wsBytes, yd, y, 0, 0, *beta);
}
cudnnStatus_t cudnnConvolutionBiasActivationForward(cudnnHandle_t h, const float* alpha1, cudnnTensorDescriptor_t xd, const float* x,
    cudnnFilterDescriptor_t wd, const float* w, cudnnConvolutionDescriptor_t c, int algo, void* ws, size_t wsBytes,
    const float* alpha2, cudnnTensorDescriptor_t zd, const float* z, cudnnTensorDescriptor_t bd, const float* bias,
    cudnnActivationDescriptor_t act, cudnnTensorDescriptor_t yd, float* y) {
  FAIL("cudnnConvolutionBiasActivationForward");
  if (bd->n != 1 || bd->c != yd->c || bd->h != 1 || bd->w != 1 || act->mode != 1 || *alpha2 != 0 || zd != yd) return 2000;
  return conv(h, *alpha1, xd, x, wd, w, c, algo, ws, wsBytes, yd, y, bias, 1, 0);
}
cudnnStatus_t cudnnAddTensor(cudnnHandle_t h, const float* alpha, cudnnTensorDescriptor_t ad, const float* a,
    const float* beta, cudnnTensorDescriptor_t cd, float* c) {
  FAIL("cudnnAddTensor");
  if (ad->n != 1 || ad->c != cd->c || ad->h != 1 || ad->w != 1) return 2000;
  long long plane = (long long)cd->h * cd->w;
  for (long long i = 0; i < (long long)cd->n * cd->c * plane; i++) c[i] = *alpha * a[i / plane % cd->c] + *beta * c[i];
  return 0;
}
cudnnStatus_t cudnnActivationForward(cudnnHandle_t h, cudnnActivationDescriptor_t act, const float* alpha,
    cudnnTensorDescriptor_t xd, const float* x, const float* beta, cudnnTensorDescriptor_t yd, float* y) {
  FAIL("cudnnActivationForward");
  if (act->mode != 1) return 2000;
  for (long long i = 0; i < (long long)yd->n * yd->c * yd->h * yd->w; i++) y[i] = *alpha * (x[i] > 0 ? x[i] : 0) + (*beta != 0 ? *beta * y[i] : 0);
  return 0;
}
`

// fakeConvCases are the shapes the fake and the emulator convolve:
// groups, depthwise, dilation, stride, padding, 1×1, bias and ReLU.
var fakeConvCases = []Convolution{
	{Batch: 2, Channels: 4, Height: 7, Width: 6, Filters: 6, KernelH: 3, KernelW: 3, Groups: 2, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1},
	{Batch: 1, Channels: 3, Height: 9, Width: 9, Filters: 3, KernelH: 3, KernelW: 3, Groups: 3, PadH: 2, PadW: 2, StrideH: 2, StrideW: 2, DilationH: 2, DilationW: 2, Relu: true},
	{Batch: 2, Channels: 5, Height: 4, Width: 5, Filters: 2, KernelH: 1, KernelW: 1, Groups: 1, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Relu: true},
	{Batch: 1, Channels: 2, Height: 8, Width: 5, Filters: 4, KernelH: 2, KernelW: 3, Groups: 1, PadH: 0, PadW: 1, StrideH: 3, StrideW: 1, DilationH: 1, DilationW: 2},
}

// testConvolver convolves every case (with and without a bias) on b and
// compares with convolve, the definition.
func testConvolver(t *testing.T, b Backend) {
	t.Helper()
	conv := b.(Convolver)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(rng.NormFloat64())
		}
		return out
	}
	for i, tc := range fakeConvCases {
		for _, withBias := range []bool{false, true} {
			c := tc
			c.OutH = ConvOutput(c.Height, c.KernelH, c.PadH, c.StrideH, c.DilationH)
			c.OutW = ConvOutput(c.Width, c.KernelW, c.PadW, c.StrideW, c.DilationW)
			nx, nw, ny := c.elems()
			x, w, bias := random(nx), random(nw), random(c.Filters)
			var ptrs []Ptr
			upload := func(data []float32) Ptr {
				p, err := b.Alloc(4 * len(data))
				if err != nil {
					t.Fatal(err)
				}
				ptrs = append(ptrs, p)
				if err := UploadFloats(b, p, data); err != nil {
					t.Fatal(err)
				}
				return p
			}
			c.X, c.Filter, c.Y = upload(x), upload(w), upload(make([]float32, ny))
			if !withBias {
				bias = nil
			} else {
				c.Bias = upload(bias)
			}
			if err := conv.Conv(&c); err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			got, want := make([]float32, ny), make([]float32, ny)
			if err := DownloadFloats(b, got, c.Y); err != nil {
				t.Fatal(err)
			}
			convolve(&c, x, w, bias, want)
			for j := range want {
				if math.Abs(float64(got[j]-want[j])) > 1e-5*(1+math.Abs(float64(want[j]))) {
					t.Fatalf("case %d (%s, bias %v): y[%d] = %v, want %v", i, &c, withBias, j, got[j], want[j])
				}
			}
			for _, p := range ptrs {
				b.Free(p)
			}
		}
	}
}

// TestFakeCUDNN: convolutions through the cuDNN bindings match the
// definition on every case, Find runs once per shape, the algorithm
// whose workspace cannot be allocated is passed over, and Close leaves
// no descriptor behind.
func TestFakeCUDNN(t *testing.T) {
	c, f, _ := openFake(t)
	if err := c.ConvError(); err != nil {
		t.Fatal(err)
	}
	if d := c.Describe(); !strings.Contains(d, "cuDNN 9.1.0") {
		t.Errorf("Describe = %q", d)
	}
	if size := unsafe.Sizeof(convPerf{}); size != 48 {
		t.Errorf("convPerf takes %d bytes; cudnnConvolutionFwdAlgoPerf_t takes 48", size)
	}
	before := f.findCalls()
	testConvolver(t, c)
	// Eight convolutions, four shapes, each with and without a bias: the
	// bias does not change the algorithm.
	if n := f.findCalls() - before; n != 4 {
		t.Errorf("Find ran %d times for 4 shapes", n)
	}
	for _, p := range c.dnn.plans {
		if p.algo != 1 || p.wsBytes != 4096 {
			t.Errorf("algorithm %d with %d bytes of workspace; want 1 (6's terabyte cannot be allocated)", p.algo, p.wsBytes)
		}
	}
	// The fused call failing with NOT_SUPPORTED: three calls instead.
	f.fail("cudnnConvolutionBiasActivationForward", 3000)
	testConvolver(t, c)
	f.fail("", 0)
	if n := f.findCalls() - before; n != 4 {
		t.Errorf("Find ran %d times, not once per shape", n)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if f.cudnnLive() != 0 || f.liveAllocs() != 0 {
		t.Errorf("after Close: %d cuDNN objects, %d allocations", f.cudnnLive(), f.liveAllocs())
	}
}

// smallConv allocates a 1×1×4×4 input convolved by one 3×3 filter.
func smallConv(t *testing.T, b Backend) *Convolution {
	t.Helper()
	c := &Convolution{Batch: 1, Channels: 1, Height: 4, Width: 4, Filters: 1, KernelH: 3, KernelW: 3, Groups: 1,
		StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, OutH: 2, OutW: 2}
	for _, p := range []*Ptr{&c.X, &c.Filter, &c.Y} {
		var err error
		if *p, err = b.Alloc(64); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestFakeCUDNNErrors: without cuDNN, or with cuDNN 8, the context opens
// and ConvError says why in one line; a failing Find, workspace or
// forward call is an error naming the call, cuDNN's status and the shape.
func TestFakeCUDNNErrors(t *testing.T) {
	f := useFakeCUDA(t)
	t.Run("absent", func(t *testing.T) {
		cudnnLibraries = []string{"libcudnn-absent.so.9"}
		defer func() { cudnnLibraries = []string{f.path} }()
		c := openFakeContext(t)
		err := c.ConvError()
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no cuDNN library (tried libcudnn-absent.so.9)") {
			t.Errorf("ConvError = %v", err)
		}
		if err := c.Conv(smallConv(t, c)); err == nil {
			t.Error("Conv without cuDNN succeeded")
		}
		if !strings.Contains(c.Describe(), "no cuDNN") {
			t.Errorf("Describe = %q", c.Describe())
		}
	})
	t.Run("version", func(t *testing.T) {
		f.cudnnVersion(8905)
		defer f.cudnnVersion(90100)
		err := openFakeContext(t).ConvError()
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasSuffix(err.Error(), "found cuDNN 8.9.5 in "+f.path+", need cuDNN 9") {
			t.Errorf("ConvError = %v", err)
		}
	})
	t.Run("create", func(t *testing.T) {
		f.fail("cudnnCreate", 4000)
		defer f.fail("", 0)
		if err := openFakeContext(t).ConvError(); err == nil || !strings.Contains(err.Error(), "cudnnCreate: CUDNN_STATUS_INTERNAL_ERROR (4000)") {
			t.Errorf("ConvError = %v", err)
		}
	})
	for _, tc := range []struct {
		call, want string
		rc         int32
	}{
		{"cudnnFindConvolutionForwardAlgorithm", "cudnnFindConvolutionForwardAlgorithm: CUDNN_STATUS_INTERNAL_ERROR (4000) (conv x 1×1×4×4", 4000},
		{"cudnnConvolutionForward", "cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM (2000) (conv x 1×1×4×4", 2000},
		{"cudnnCreateFilterDescriptor", "cudnnCreateFilterDescriptor: CUDNN_STATUS_NOT_SUPPORTED (3000)", 3000},
	} {
		t.Run(tc.call, func(t *testing.T) {
			c := openFakeContext(t)
			live := f.cudnnLive()
			f.fail(tc.call, tc.rc)
			defer f.fail("", 0)
			if err := c.Conv(smallConv(t, c)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Conv: %v\nwant %s", err, tc.want)
			}
			if tc.call != "cudnnConvolutionForward" && f.cudnnLive() != live {
				t.Errorf("%d descriptors left by the failure", f.cudnnLive()-live)
			}
		})
	}
	t.Run("workspace", func(t *testing.T) {
		c := openFakeContext(t)
		cv := smallConv(t, c)
		f.allocLimit(8)
		defer f.allocLimit(1 << 32)
		err := c.PrepareConv(cv)
		if err == nil || !strings.Contains(err.Error(), "no cuDNN workspace for conv") ||
			!strings.Contains(err.Error(), "algorithm 0: cuda: cuMemAlloc_v2: CUDA_ERROR_FAKE (2): fake description (a workspace of 16 bytes)") {
			t.Errorf("PrepareConv: %v", err)
		}
	})
}

// TestFakeCUDAGraph: captured launches run only when the graph is
// replayed, copies that wait are refused during a capture, an unprepared
// convolution cannot be captured, failures of the capture calls name
// them, and Close destroys the graphs left.
func TestFakeCUDAGraph(t *testing.T) {
	c, f, _ := openFake(t)
	if err := c.CaptureError(); err != nil {
		t.Fatal(err)
	}
	fill, err := c.Function(Elementwise, KernelFill)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := c.Alloc(4 * 8)
	out := make([]float32, 8)
	if err := c.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(fill, Dim3{1, 1, 1}, Dim3{8, 1, 1}, NewArgs().Ptr(y).I64(8).F32(7)); err != nil {
		t.Fatal(err)
	}
	if err := DownloadFloats(c, out, y); err == nil || !strings.Contains(err.Error(), "DeviceToHost while the stream is being captured") {
		t.Errorf("DeviceToHost during capture: %v", err)
	}
	if err := c.Conv(smallConv(t, c)); err == nil || !strings.Contains(err.Error(), "was not prepared before the capture began") {
		t.Errorf("Conv during capture: %v", err)
	}
	g, err := c.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := DownloadFloats(c, out, y); err != nil || !math.IsNaN(float64(out[0])) {
		t.Errorf("the captured fill ran at once: %v %v", out, err)
	}
	for range 2 {
		UploadFloats(c, y, make([]float32, 8))
		if err := c.Replay(g); err != nil {
			t.Fatal(err)
		}
		if err := DownloadFloats(c, out, y); err != nil || out[0] != 7 || out[7] != 7 {
			t.Errorf("after replay: %v %v", out, err)
		}
	}
	if err := c.DestroyGraph(g); err != nil || c.Replay(g) == nil {
		t.Errorf("DestroyGraph: %v; replay after it succeeded", err)
	}
	for _, call := range []string{"cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags"} {
		f.fail(call, 900)
		err := c.BeginCapture()
		if err == nil {
			_, err = c.EndCapture()
		}
		f.fail("", 0)
		if err == nil || !strings.Contains(err.Error(), call+": CUDA_ERROR_FAKE (900)") {
			t.Errorf("%s failing: %v", call, err)
		}
		if c.capturing {
			t.Errorf("%s failing left the capture open", call)
		}
	}
	if _, err := c.EndCapture(); err == nil {
		t.Error("EndCapture without a capture succeeded")
	}
	if err := c.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EndCapture(); err != nil {
		t.Fatal(err)
	}
	if f.liveGraphs() != 2 {
		t.Errorf("%d graph objects live, want 2 (graph and instance)", f.liveGraphs())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if f.liveGraphs() != 0 {
		t.Errorf("after Close: %d graph objects", f.liveGraphs())
	}
}

// TestConvolver runs the convolution cases through the Convolver entry
// on the emulator and, where there is one, on cuDNN.
func TestConvolver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		conv, ok := b.(Convolver)
		if !ok || conv.ConvError() != nil {
			t.Skipf("%s does not convolve: %v", b.Device(), conv.ConvError())
		}
		testConvolver(t, b)
	})
}

// TestEmulatorCapture: the emulator records launches, products and
// copies between BeginCapture and EndCapture and runs them on Replay.
func TestEmulatorCapture(t *testing.T) {
	e := openEmulator(t)
	fill, err := e.Function(Elementwise, KernelFill)
	if err != nil {
		t.Fatal(err)
	}
	y, _ := e.Alloc(16)
	z, _ := e.Alloc(16)
	if err := e.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(fill, Dim3{1, 1, 1}, Dim3{4, 1, 1}, NewArgs().Ptr(y).I64(4).F32(3)); err != nil {
		t.Fatal(err)
	}
	if err := e.DeviceToDevice(z, y, 16); err != nil {
		t.Fatal(err)
	}
	if err := UploadFloats(e, y, []float32{1, 2, 3, 4}); err == nil || e.Synchronize() == nil {
		t.Error("a host copy or Synchronize during the capture succeeded")
	}
	g, err := e.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 4)
	DownloadFloats(e, out, z)
	if !math.IsNaN(float64(out[0])) {
		t.Fatalf("the capture ran at once: %v", out)
	}
	if err := e.Replay(g); err != nil {
		t.Fatal(err)
	}
	DownloadFloats(e, out, z)
	if out[0] != 3 || out[3] != 3 {
		t.Errorf("replay gave %v", out)
	}
	if err := e.DestroyGraph(g); err != nil || e.Replay(g) == nil {
		t.Errorf("DestroyGraph: %v; replay after it succeeded", err)
	}
}

// TestFakePrecision: FP32 and TF32 products set cuBLAS's math mode (only
// when it changes), BF16 ones call the Ex products with
// CUBLAS_COMPUTE_32F_FAST_16BF, and each precision gives convolutions
// their cuDNN math type and their own algorithm choice.
func TestFakePrecision(t *testing.T) {
	c, f, _ := openFake(t)
	defer c.Close()
	for _, tc := range []struct {
		p             Precision
		math, compute int32
		convMath      int32
	}{{TF32, 3, 0, 1}, {FP32, 0, 0, 3}, {BF16, 0, 75, 2}} {
		testFakeGemmAt(t, c, tc.p)
		if f.blasMath() != tc.math || (tc.compute != 0 && f.gemmCompute() != tc.compute) {
			t.Errorf("%s: math mode %d, compute type %d; want %d, %d", tc.p, f.blasMath(), f.gemmCompute(), tc.math, tc.compute)
		}
		cv := smallConv(t, c)
		cv.Precision = tc.p
		finds := f.findCalls()
		if err := c.Conv(cv); err != nil {
			t.Fatal(err)
		}
		if f.convMath() != tc.convMath || f.findCalls() != finds+1 {
			t.Errorf("%s: cuDNN math type %d, want %d; %d Find calls", tc.p, f.convMath(), tc.convMath, f.findCalls()-finds)
		}
	}
	if p, err := ParsePrecision("bf16"); p != BF16 || err != nil {
		t.Errorf("ParsePrecision(bf16) = %v, %v", p, err)
	}
	if _, err := ParsePrecision("fp16"); err == nil || !strings.Contains(err.Error(), "fp32, tf32 or bf16") {
		t.Errorf("ParsePrecision(fp16): %v", err)
	}
}

// TestPrecisionRound: rounding to nearest, ties to even, at the 10th
// (TF32) and 7th (BF16) mantissa bit.
func TestPrecisionRound(t *testing.T) {
	for _, tc := range []struct {
		p       Precision
		x, want float32
	}{
		{TF32, 1 + 0x1p-11, 1},                     // a tie, to the even 1
		{TF32, 1 + 3*0x1p-11, 1 + 0x1p-9},          // a tie, up to even
		{TF32, 1 + 0x1p-11 + 0x1p-20, 1 + 0x1p-10}, // past the tie
		{BF16, 1 + 0x1p-8, 1},
		{BF16, -(1 + 3*0x1p-8), -(1 + 0x1p-6)},
		{BF16, 3.1415927, 3.140625},
		{FP32, 3.1415927, 3.1415927},
	} {
		if got := tc.p.Round(tc.x); got != tc.want {
			t.Errorf("%s.Round(%v) = %v, want %v", tc.p, tc.x, got, tc.want)
		}
	}
	if x := float32(math.Inf(1)); BF16.Round(x) != x {
		t.Error("Round(+Inf) is not +Inf")
	}
}

// TestEmulatorPrecision: the emulator's products and convolutions at
// TF32 and BF16 differ from FP32 (the operands were rounded) by no more
// than the rounding allows. Each product of two rounded operands is off
// by a relative 2u at most (u = 2^-11 for TF32's 10-bit mantissa, 2^-8
// for BF16's 7), and the K errors of a sum have random signs, so the sum
// is off by about 2u·sqrt(K)·rms(a·b), while the sum itself is about
// sqrt(K)·rms(a·b): relative to the outputs' scale the error is about
// 2u whatever K. The bound, 8u of max|y|, leaves a margin of 4.
func TestEmulatorPrecision(t *testing.T) {
	e := openEmulator(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 16, 12, 300
	a, b := make([]float32, m*k), make([]float32, k*n)
	for _, xs := range [][]float32{a, b} {
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
	}
	pa, _ := e.Alloc(4 * len(a))
	pb, _ := e.Alloc(4 * len(b))
	pc, _ := e.Alloc(4 * m * n)
	UploadFloats(e, pa, a)
	UploadFloats(e, pb, b)
	product := func(p Precision) []float32 {
		if err := e.Gemm(&Gemm{M: m, N: n, K: k, Alpha: 1, A: pa, LDA: m, B: pb, LDB: k, C: pc, LDC: m, Batch: 1, Precision: p}); err != nil {
			t.Fatal(err)
		}
		out := make([]float32, m*n)
		DownloadFloats(e, out, pc)
		return out
	}
	exact := product(FP32)
	for _, p := range []Precision{TF32, BF16} {
		u := math.Ldexp(1, -p.MantissaBits()-1)
		d := relDiff(product(p), exact)
		if d > 8*u || d < u/64 {
			t.Errorf("%s product: max|Δ|/max|y| = %.3g, want within (%.3g, %.3g]", p, d, u/64, 8*u)
		}
	}
}

func relDiff(got, want []float32) float64 {
	diff, scale := 0.0, 0.0
	for i := range want {
		diff = max(diff, math.Abs(float64(got[i]-want[i])))
		scale = max(scale, math.Abs(float64(want[i])))
	}
	return diff / scale
}
