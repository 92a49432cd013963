package cuda

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// fakeCUDA is a stand-in for libcuda, libnvrtc and libcublas, written
// against the C prototypes of NVIDIA's API documentation. Open loads it
// instead of the real libraries, so the purego bindings (argument order
// and widths, arguments passed on the stack, strings, out-parameters) and
// Context's handling of the per-thread current context are exercised
// without a GPU: every call that needs a context fails with
// CUDA_ERROR_INVALID_CONTEXT unless the calling thread made the primary
// context current. Memory is host memory; NVRTC's "PTX" is the source
// text with the options prepended; cuLaunchKernel runs rb_fill and
// records the arguments of any kernel; cuBLAS computes its column-major
// definition.
const fakeCUDASource = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUevent_st* CUevent;

static int primary_refs;
static long live_allocs;
static __thread CUcontext current;
static int ctx_token;
#define CTX ((CUcontext)&ctx_token)
#define NEED_CTX do { if (current != CTX) return 201; } while (0)

CUresult cuInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
CUresult cuDriverGetVersion(int* v) { *v = 12040; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(CUdevice* d, int ordinal) { if (ordinal != 0) return 101; *d = 7; return 0; }
CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (dev != 7) return 101;
  snprintf(name, len, "Fake GPU");
  return 0;
}
CUresult cuDeviceGetAttribute(int* v, int attr, CUdevice dev) {
  if (dev != 7) return 101;
  *v = attr == 75 ? 9 : attr == 76 ? 0 : 0;
  return 0;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) { *bytes = (size_t)80 << 30; return dev == 7 ? 0 : 101; }
CUresult cuGetErrorName(CUresult rc, const char** s) {
  switch (rc) {
  case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
  case 222: *s = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"; return 0;
  case 500: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
  }
  *s = "CUDA_ERROR_FAKE";
  return 0;
}
CUresult cuGetErrorString(CUresult rc, const char** s) { *s = "fake description"; return 0; }
CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice dev) { if (dev != 7) return 101; primary_refs++; *c = CTX; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { if (dev != 7 || primary_refs == 0) return 1; primary_refs--; return 0; }
CUresult cuCtxSetCurrent(CUcontext c) { if (c != 0 && c != CTX) return 201; current = c; return 0; }
CUresult cuCtxSynchronize(void) { NEED_CTX; return 0; }

static int stream_token;
CUresult cuStreamCreate(CUstream* s, unsigned int flags) { NEED_CTX; *s = (CUstream)&stream_token; return 0; }
CUresult cuStreamDestroy_v2(CUstream s) { NEED_CTX; return s == (CUstream)&stream_token ? 0 : 400; }
CUresult cuStreamSynchronize(CUstream s) { NEED_CTX; return s == (CUstream)&stream_token ? 0 : 400; }

static size_t alloc_limit = (size_t)1 << 32;
void fake_alloc_limit(size_t n) { alloc_limit = n; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  NEED_CTX;
  if (bytes == 0) return 1;
  if (bytes > alloc_limit) return 2;
  void* m = malloc(bytes);
  memset(m, 0xff, bytes);
  live_allocs++;
  *p = (CUdeviceptr)m;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { NEED_CTX; free((void*)p); live_allocs--; return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  NEED_CTX; if (s != (CUstream)&stream_token) return 400; memcpy((void*)dst, src, n); return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  NEED_CTX; if (s != (CUstream)&stream_token) return 400; memcpy(dst, (void*)src, n); return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  NEED_CTX; if (s != (CUstream)&stream_token) return 400; memcpy((void*)dst, (void*)src, n); return 0;
}

// A module is the image text; a function, a name in it.
struct CUmod_st { char* image; };
struct CUfunc_st { char name[64]; };
static int modules_loaded;
CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  NEED_CTX;
  const char* text = (const char*)image;
  if (strstr(text, "UNSUPPORTED_PTX") && strncmp(text, "CUBIN", 5) != 0) return 222;
  struct CUmod_st* mod = (struct CUmod_st*)malloc(sizeof *mod);
  mod->image = strdup(text);
  modules_loaded++;
  *m = mod;
  return 0;
}
CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  NEED_CTX;
  char decl[128];
  snprintf(decl, sizeof decl, "__global__ void %s(", name);
  if (!strstr(m->image, decl)) return 500;
  struct CUfunc_st* fn = (struct CUfunc_st*)malloc(sizeof *fn);
  snprintf(fn->name, sizeof fn->name, "%s", name);
  *f = fn;
  return 0;
}
CUresult cuModuleUnload(CUmodule m) { NEED_CTX; free(m->image); free(m); modules_loaded--; return 0; }

// The test says how many bytes each parameter of the next launch has;
// the launch copies them out.
static int expect_n, expect_sizes[32];
static unsigned char recorded[4096];
static int recorded_len;
static unsigned recorded_dims[7];
void fake_expect(int n, const int* sizes) { expect_n = n; memcpy(expect_sizes, sizes, n * sizeof(int)); }
int fake_recorded(unsigned char* out, unsigned* dims) { memcpy(out, recorded, recorded_len); memcpy(dims, recorded_dims, sizeof recorded_dims); return recorded_len; }
long fake_live_allocs(void) { return live_allocs; }
int fake_primary_refs(void) { return primary_refs; }
int fake_modules(void) { return modules_loaded; }

// Stream capture records rb_fill launches; a graph replays them.
static int capturing;
struct fill { float* y; long long n; float v; };
static struct fill captured[16];
static int ncaptured;
static int capture_fill(float* y, long long n, float v) {
  if (ncaptured == 16) return 1;
  captured[ncaptured].y = y; captured[ncaptured].n = n; captured[ncaptured].v = v;
  ncaptured++;
  return 0;
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream s, void** params, void** extra) {
  NEED_CTX;
  if (s != (CUstream)&stream_token || extra != 0) return 1;
  unsigned dims[7] = {gx, gy, gz, bx, by, bz, shared};
  memcpy(recorded_dims, dims, sizeof dims);
  recorded_len = 0;
  for (int i = 0; i < expect_n; i++) {
    memcpy(recorded + recorded_len, params[i], expect_sizes[i]);
    recorded_len += expect_sizes[i];
  }
  if (strcmp(f->name, "rb_fill") == 0) {
    float* y = *(float**)params[0];
    long long n = *(long long*)params[1];
    float v = *(float*)params[2];
    if (capturing) return capture_fill(y, n, v);
    for (long long i = 0; i < n; i++) y[i] = v;
  }
  return 0;
}

static int event_tokens[2];
CUresult cuEventCreate(CUevent* e, unsigned flags) { NEED_CTX; static int next; *e = (CUevent)&event_tokens[next++ % 2]; return 0; }
CUresult cuEventRecord(CUevent e, CUstream s) { NEED_CTX; return s == (CUstream)&stream_token ? 0 : 400; }
CUresult cuEventSynchronize(CUevent e) { NEED_CTX; return 0; }
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) { NEED_CTX; *ms = a != b ? 1.5f : -1.0f; return 0; }
CUresult cuEventDestroy_v2(CUevent e) { NEED_CTX; return 0; }

// NVRTC.
typedef int nvrtcResult;
struct _nvrtcProgram { char* src; char* name; char* out; char* log; };
typedef struct _nvrtcProgram* nvrtcProgram;
nvrtcResult nvrtcVersion(int* major, int* minor) { *major = 12; *minor = 4; return 0; }
nvrtcResult nvrtcCreateProgram(nvrtcProgram* p, const char* src, const char* name, int nh, const char* const* h, const char* const* in) {
  if (nh != 0 || h != 0 || in != 0) return 3;
  nvrtcProgram prog = (nvrtcProgram)calloc(1, sizeof *prog);
  prog->src = strdup(src);
  prog->name = strdup(name);
  *p = prog;
  return 0;
}
nvrtcResult nvrtcCompileProgram(nvrtcProgram p, int n, const char* const* opts) {
  size_t size = strlen(p->src) + 256;
  for (int i = 0; i < n; i++) size += strlen(opts[i]) + 1;
  p->out = (char*)malloc(size);
  int cubin = n > 0 && strstr(opts[0], "=sm_") != 0;
  strcpy(p->out, cubin ? "CUBIN" : "PTX");
  for (int i = 0; i < n; i++) { strcat(p->out, " "); strcat(p->out, opts[i]); }
  strcat(p->out, "\n");
  strcat(p->out, p->src);
  if (strstr(p->src, "#error")) { p->log = strdup("fake.cu(1): error: #error directive"); return 6; }
  p->log = strdup("");
  return 0;
}
nvrtcResult nvrtcGetPTXSize(nvrtcProgram p, size_t* s) { *s = strlen(p->out) + 1; return 0; }
nvrtcResult nvrtcGetPTX(nvrtcProgram p, char* out) { strcpy(out, p->out); return 0; }
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram p, size_t* s) { *s = strlen(p->out); return 0; }
nvrtcResult nvrtcGetCUBIN(nvrtcProgram p, char* out) { memcpy(out, p->out, strlen(p->out)); return 0; }
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram p, size_t* s) { *s = strlen(p->log) + 1; return 0; }
nvrtcResult nvrtcGetProgramLog(nvrtcProgram p, char* out) { strcpy(out, p->log); return 0; }
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* p) {
  free((*p)->src); free((*p)->name); free((*p)->out); free((*p)->log); free(*p); *p = 0; return 0;
}
const char* nvrtcGetErrorString(nvrtcResult rc) { return rc == 6 ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR_FAKE"; }
nvrtcResult nvrtcGetNumSupportedArchs(int* n) { *n = 5; return 0; }
nvrtcResult nvrtcGetSupportedArchs(int* a) { int v[5] = {75, 80, 86, 89, 90}; memcpy(a, v, sizeof v); return 0; }

// cuBLAS.
typedef int cublasStatus_t;
typedef struct cublasContext* cublasHandle_t;
typedef int cublasOperation_t;
static int blas_token;
static CUstream blas_stream;
cublasStatus_t cublasCreate_v2(cublasHandle_t* h) { if (current != CTX) return 1; *h = (cublasHandle_t)&blas_token; return 0; }
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { return h == (cublasHandle_t)&blas_token ? 0 : 1; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, CUstream s) { blas_stream = s; return 0; }
const char* cublasGetStatusName(cublasStatus_t s) { return s == 7 ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_FAKE"; }
static float at(const float* x, int trans, int ld, int i, int j) { return trans ? x[j + (long long)i * ld] : x[i + (long long)j * ld]; }
static cublasStatus_t gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const float* alpha, const float* A, int lda, long long sa, const float* B, int ldb, long long sb,
    const float* beta, float* C, int ldc, long long sc, int batch) {
  if (current != CTX || h != (cublasHandle_t)&blas_token || blas_stream != (CUstream)&stream_token) return 1;
  if (m < 0 || n < 0 || k < 0 || batch < 1 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
  if (lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m || lda < 1 || ldb < 1 || ldc < 1) return 7;
  for (int b = 0; b < batch; b++)
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) {
        float acc = 0;
        for (int l = 0; l < k; l++) acc += at(A + b * sa, ta, lda, i, l) * at(B + b * sb, tb, ldb, l, j);
        float* c = C + b * sc + i + (long long)j * ldc;
        *c = *alpha * acc + (*beta != 0 ? *beta * *c : 0);
      }
  return 0;
}
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta, float* C, int ldc) {
  return gemm(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const float* alpha, const float* A, int lda, long long sa, const float* B, int ldb, long long sb,
    const float* beta, float* C, int ldc, long long sc, int batch) {
  return gemm(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
}
`

// fakeLib is the compiled fake and its test hooks.
type fakeLib struct {
	path        string
	expect      func(n int32, sizes *int32)
	recorded    func(out *byte, dims *uint32) int32
	liveAllocs  func() int64
	primaryRefs func() int32
	modules     func() int32
	// fail makes the entry point named fail with rc ("" for none).
	fail         func(name string, rc int32)
	allocLimit   func(bytes uintptr)
	cudnnVersion func(v uintptr)
	cudnnLive    func() int32 // live cuDNN descriptors and handles
	findCalls    func() int32
	liveGraphs   func() int32
	blasMath     func() int32
	gemmCompute  func() int32
	convMath     func() int32
	ltLive       func() int32 // live cuBLASLt handles, descriptors, layouts, preferences
	ltCompute    func() int32
	ltAlgo       func() int32
	ltHeuristics func() int32
	ltSetup      func(n int32, ws0, ws1 uint64, unsupported uint32)
}

var (
	fakeOnce sync.Once
	fake     *fakeLib
	fakeErr  error
)

// useFakeCUDA builds the fake (once per test binary, in a temporary
// directory) and points the library lists at it for the test.
func useFakeCUDA(t *testing.T) *fakeLib {
	t.Helper()
	fakeOnce.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			fakeErr = err
			return
		}
		dir, err := os.MkdirTemp("", "rulebook-fakecuda-")
		if err != nil {
			fakeErr = err
			return
		}
		src, lib := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libfakecuda.so")
		if err := os.WriteFile(src, []byte(fakeCUDASource+fakeGraphSource+fakeMathSource+fakeCUDNNSource+fakeLtSource), 0o644); err != nil {
			fakeErr = err
			return
		}
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-Wno-unused-parameter", "-o", lib, src, "-lm").CombinedOutput(); err != nil {
			fakeErr = errors.New(string(out))
			return
		}
		h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			fakeErr = err
			return
		}
		// The loader finds the library by this path among the loaded
		// ones from now on, so the file can go.
		defer os.RemoveAll(dir)
		f := &fakeLib{path: lib}
		purego.RegisterLibFunc(&f.expect, h, "fake_expect")
		purego.RegisterLibFunc(&f.recorded, h, "fake_recorded")
		purego.RegisterLibFunc(&f.liveAllocs, h, "fake_live_allocs")
		purego.RegisterLibFunc(&f.primaryRefs, h, "fake_primary_refs")
		purego.RegisterLibFunc(&f.modules, h, "fake_modules")
		purego.RegisterLibFunc(&f.fail, h, "fake_fail")
		purego.RegisterLibFunc(&f.allocLimit, h, "fake_alloc_limit")
		purego.RegisterLibFunc(&f.cudnnVersion, h, "fake_cudnn_version")
		purego.RegisterLibFunc(&f.cudnnLive, h, "fake_cudnn_live")
		purego.RegisterLibFunc(&f.findCalls, h, "fake_find_calls")
		purego.RegisterLibFunc(&f.liveGraphs, h, "fake_live_graphs")
		purego.RegisterLibFunc(&f.blasMath, h, "fake_blas_math")
		purego.RegisterLibFunc(&f.gemmCompute, h, "fake_gemm_compute")
		purego.RegisterLibFunc(&f.convMath, h, "fake_conv_math")
		purego.RegisterLibFunc(&f.ltLive, h, "fake_lt_live")
		purego.RegisterLibFunc(&f.ltCompute, h, "fake_lt_compute")
		purego.RegisterLibFunc(&f.ltAlgo, h, "fake_lt_algo")
		purego.RegisterLibFunc(&f.ltHeuristics, h, "fake_lt_heuristics")
		purego.RegisterLibFunc(&f.ltSetup, h, "fake_lt_setup")
		fake = f
	})
	if fakeErr != nil {
		t.Skipf("cannot build the fake CUDA library: %v", fakeErr)
	}
	saved := [7][]string{driverLibraries, nvrtcLibraries, cublasLibraries, toolkitDirs, cudnnLibraries, cudnnDirs, ltLibraries}
	driverLibraries, nvrtcLibraries, cublasLibraries, toolkitDirs = []string{fake.path}, []string{fake.path}, []string{fake.path}, nil
	cudnnLibraries, cudnnDirs, ltLibraries = []string{fake.path}, nil, []string{fake.path}
	savedPath := pathEnv
	pathEnv = func() string { return "" }
	t.Cleanup(func() {
		pathEnv = savedPath
		driverLibraries, nvrtcLibraries, cublasLibraries, toolkitDirs = saved[0], saved[1], saved[2], saved[3]
		cudnnLibraries, cudnnDirs, ltLibraries = saved[4], saved[5], saved[6]
		fake.fail("", 0)
		fake.allocLimit(1 << 32)
		fake.cudnnVersion(90100)
		fake.ltSetup(1, 0, 0, 0)
	})
	return fake
}

func openFake(t *testing.T) (*Context, *fakeLib, string) {
	t.Helper()
	f := useFakeCUDA(t)
	dir := t.TempDir()
	c, err := open(ptxCache{dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return c, f, dir
}

// openFakeContext opens a Context over the fake libraries useFakeCUDA
// installed, as they are set now, and closes it after the test.
func openFakeContext(t *testing.T) *Context {
	t.Helper()
	c, err := open(ptxCache{dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestFakeCUDA drives a Context through the fake libraries.
func TestFakeCUDA(t *testing.T) {
	c, f, cacheDir := openFake(t)
	if d := c.Device(); d.Name != "Fake GPU" || d.Major != 9 || d.Minor != 0 || d.Memory != 80<<30 || d.DriverVersion != 12040 {
		t.Errorf("device %+v", d)
	}
	if c.arch != 90 || !c.exact || c.nvrtc.version() != "12.4" {
		t.Errorf("arch %d exact %v NVRTC %s", c.arch, c.exact, c.nvrtc.version())
	}
	t.Log(c.Describe())

	// Memory round trip, from goroutines on different OS threads: every
	// call must make the context current on its own thread.
	for g := range 4 {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Never unlocked: the thread ends with the goroutine, so the
			// goroutines after it run on threads the context was never
			// made current on by anyone else.
			runtime.LockOSThread()
			data := []float32{float32(g), 2, 3}
			p, err := c.Alloc(12)
			if err != nil {
				t.Error(err)
				return
			}
			if err := UploadFloats(c, p, data); err != nil {
				t.Error(err)
			}
			q, _ := c.Alloc(12)
			if err := c.DeviceToDevice(q, p, 12); err != nil {
				t.Error(err)
			}
			out := make([]float32, 3)
			if err := DownloadFloats(c, out, q); err != nil {
				t.Error(err)
			}
			if out[0] != float32(g) || out[2] != 3 {
				t.Errorf("round trip gave %v", out)
			}
			c.Free(p)
			c.Free(q)
		}()
		wg.Wait()
	}

	// Compile (fake NVRTC), cache, load, launch.
	fn, err := c.Function(Elementwise, KernelFill)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(cacheDir)
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".ptx") {
		t.Errorf("PTX cache holds %v", entries)
	}
	cached, _ := os.ReadFile(filepath.Join(cacheDir, entries[0].Name()))
	if !strings.HasPrefix(string(cached), "PTX --gpu-architecture=compute_90\n") || cached[len(cached)-1] != 0 {
		t.Errorf("cached image starts %q", cached[:min(60, len(cached))])
	}
	y, err := c.Alloc(4 * 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(fn, Dim3{4, 1, 1}, Dim3{256, 1, 1}, NewArgs().Ptr(y).I64(1000).F32(2.5)); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 1000)
	if err := DownloadFloats(c, out, y); err != nil {
		t.Fatal(err)
	}
	if out[0] != 2.5 || out[999] != 2.5 {
		t.Errorf("rb_fill wrote %v … %v", out[0], out[999])
	}
	if fn2, err := c.Function(Elementwise, KernelUnary); err != nil || fn2 == fn {
		t.Errorf("second kernel of the module: %v", err)
	}
	if f.modules() != 1 {
		t.Errorf("%d modules loaded, want 1", f.modules())
	}

	// Every kind of argument reaches the kernel with the bytes C expects.
	binary, err := c.Function(Elementwise, KernelBinary)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int32{8, 8, 8, 8, 4, 4, 64, 64, 64}
	f.expect(int32(len(sizes)), &sizes[0])
	args := NewArgs().Ptr(y).Ptr(y + 4).Ptr(y + 8).I64(-3).I32(BinaryPow).I32(-2).Shape([]int{1, 2, 3}).Shape([]int{4}).Shape(nil)
	if err := c.Launch(binary, Dim3{3, 2, 1}, Dim3{32, 4, 2}, args); err != nil {
		t.Fatal(err)
	}
	var rec [4096]byte
	var dims [7]uint32
	n := f.recorded(&rec[0], &dims[0])
	want := []byte{}
	for _, v := range []uint64{uint64(y), uint64(y + 4), uint64(y + 8), uint64(math.MaxUint64 - 2)} {
		want = append(want, unsafe.Slice((*byte)(unsafe.Pointer(&v)), 8)...)
	}
	for _, v := range []int32{BinaryPow, -2} {
		want = append(want, unsafe.Slice((*byte)(unsafe.Pointer(&v)), 4)...)
	}
	for _, s := range []Shape8{{1, 2, 3}, {4}, {}} {
		want = append(want, unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 64)...)
	}
	if string(rec[:n]) != string(want) {
		t.Errorf("kernel parameters:\n got %x\nwant %x", rec[:n], want)
	}
	if dims != [7]uint32{3, 2, 1, 32, 4, 2, 0} {
		t.Errorf("launch dimensions %v", dims)
	}
	zero := int32(0)
	f.expect(0, &zero)

	// cuBLAS through both entry points, against the column-major
	// definition (the fake computes it in C).
	testFakeGemm(t, c)

	if d, err := c.Time(func() error { return nil }); err != nil || d.Seconds() != 0.0015 {
		t.Errorf("Time = %v, %v", d, err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if f.liveAllocs() != 0 || f.primaryRefs() != 0 || f.modules() != 0 {
		t.Errorf("after Close: %d allocations, %d primary context references, %d modules", f.liveAllocs(), f.primaryRefs(), f.modules())
	}
	if _, err := c.Alloc(4); err == nil {
		t.Error("Alloc after Close succeeded")
	}
}

func testFakeGemm(t *testing.T, c *Context) { testFakeGemmAt(t, c, FP32) }

// testFakeGemmAt runs the products at a precision; the operands are
// small integers, exact in bfloat16, so every precision gives the
// exact product.
func testFakeGemmAt(t *testing.T, c *Context, p Precision) {
	const m, n, k = 3, 2, 4
	a := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24}
	b := []float32{1, -1, 2, 5, 3, -3, 4, 7}
	pa, _ := c.Alloc(4 * len(a))
	pb, _ := c.Alloc(4 * len(b))
	pc, _ := c.Alloc(4 * 2 * m * n)
	UploadFloats(c, pa, a)
	UploadFloats(c, pb, b)
	for _, batch := range []int{1, 2} {
		g := &Gemm{M: m, N: n, K: k, Alpha: 1, Beta: 0, A: pa, LDA: m, StrideA: m * k, B: pb, LDB: k, StrideB: 0,
			C: pc, LDC: m, StrideC: m * n, Batch: batch, Precision: p}
		if err := c.Gemm(g); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, batch*m*n)
		if err := DownloadFloats(c, got, pc); err != nil {
			t.Fatal(err)
		}
		for bi := range batch {
			for i := range m {
				for j := range n {
					want := float32(0)
					for l := range k {
						want += a[bi*m*k+i+l*m] * b[l+j*k]
					}
					if got[bi*m*n+i+j*m] != want {
						t.Fatalf("batch %d of %d: C(%d,%d) = %v, want %v", bi, batch, i, j, got[bi*m*n+i+j*m], want)
					}
				}
			}
		}
	}
	bad := &Gemm{M: m, N: n, K: k, Alpha: 1, A: pa, LDA: m - 1, B: pb, LDB: k, C: pc, LDC: m, Batch: 1}
	if err := c.Gemm(bad); err == nil {
		t.Error("lda < m accepted")
	}
	c.Free(pa)
	c.Free(pb)
	c.Free(pc)
}

// TestFakeCUDAErrors: compile errors carry NVRTC's log, an unknown kernel
// names the module, and PTX the driver rejects falls back to a CUBIN.
func TestFakeCUDAErrors(t *testing.T) {
	c, _, _ := openFake(t)
	defer c.Close()
	broken := &Source{Name: "broken", Code: "#error nope\nextern \"C\" __global__ void k(float* x) { }\n"}
	if _, err := c.Function(broken, "k"); err == nil || !strings.Contains(err.Error(), "#error directive") || !strings.Contains(err.Error(), "NVRTC_ERROR_COMPILATION") {
		t.Errorf("compile error: %v", err)
	}
	if _, err := c.Function(Elementwise, "rb_nonexistent"); err == nil {
		t.Error("an unknown kernel was found")
	}
	old := &Source{Name: "old", Code: "// UNSUPPORTED_PTX\nextern \"C\" __global__ void k(float* x) { }\n"}
	f, err := c.Function(old, "k")
	if err != nil {
		t.Fatalf("CUBIN fallback: %v", err)
	}
	if m := c.modules[old]; !strings.HasPrefix(m.how, "CUBIN sm_90") {
		t.Errorf("module loaded as %q", m.how)
	}
	_ = f
	// Errors name the call and the driver's error name.
	err = c.fail("cuMemAlloc_v2", 201)
	if !strings.Contains(err.Error(), "cuMemAlloc_v2: CUDA_ERROR_INVALID_CONTEXT (201): fake description") {
		t.Errorf("error %q", err)
	}
}
