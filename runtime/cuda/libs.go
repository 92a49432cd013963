package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ebitengine/purego"
)

// The NVRTC and cuBLAS libraries are looked for by these names, in order,
// through the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig's
// cache), and then by full path in the CUDA toolkit directories and the
// directories of NVIDIA's Python wheels (nvidia-cuda-nvrtc-cu12,
// nvidia-cublas-cu12, which PyTorch installs), system-wide and in the
// environment of each python3 on PATH.
var (
	nvrtcLibraries  = []string{"libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so.11.2"}
	cublasLibraries = []string{"libcublas.so", "libcublas.so.12", "libcublas.so.13", "libcublas.so.11"}
	toolkitDirs     = []string{
		"/usr/local/cuda*/lib64",
		"/usr/local/cuda*/targets/*/lib",
		"/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
		"/usr/local/lib/python3*/site-packages/nvidia/*/lib",
		"/usr/lib/python3/dist-packages/nvidia/*/lib",
	}
)

// pathEnv reads PATH for pythonWheelDirs; tests that load the fake
// libraries empty it.
var pathEnv = func() string { return os.Getenv("PATH") }

// pythonWheelDirs are the NVIDIA wheel directories of the Python
// environments whose python3 is on path: PyTorch's CUDA wheels in a
// virtual environment (such as /opt/torch/.venv) are on no loader path
// and in none of toolkitDirs.
func pythonWheelDirs(path string) []string {
	var dirs []string
	for _, bin := range filepath.SplitList(path) {
		if bin == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(bin, "python3")); err != nil {
			continue
		}
		prefix := filepath.Dir(filepath.Clean(bin))
		for _, site := range []string{"site-packages", "dist-packages"} {
			d := filepath.Join(prefix, "lib", "python3*", site, "nvidia", "*", "lib")
			if !slices.Contains(dirs, d) && !slices.Contains(toolkitDirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

// searchDirs are the directory patterns the libraries are looked for in
// by full path.
func searchDirs() []string { return slices.Concat(toolkitDirs, pythonWheelDirs(pathEnv())) }

// libraryCandidates returns the names to try for a library: the plain
// names, then, directory pattern by pattern, the files whose names start
// with base (e.g. "libnvrtc.so"), newest-looking first within a pattern.
// glob is filepath.Glob, replaceable in tests.
func libraryCandidates(names []string, base string, dirs []string, glob func(string) ([]string, error)) []string {
	out := slices.Clone(names)
	for _, dir := range dirs {
		matches, _ := glob(filepath.Join(dir, base+"*"))
		var found []string
		for _, m := range matches {
			// Skip NVRTC's builtins library and cuBLAS's Lt library,
			// which share the prefix.
			// (unless cuBLASLt itself is looked for).
			lt := strings.HasPrefix(filepath.Base(m), "libcublasLt") && !strings.HasPrefix(base, "libcublasLt")
			if strings.Contains(filepath.Base(m), "builtins") || lt {
				continue
			}
			found = append(found, m)
		}
		// Descending, so that cuda-13.0 comes before cuda-12.4 and
		// libnvrtc.so.12.4.99 before libnvrtc.so.12.
		slices.Sort(found)
		slices.Reverse(found)
		for _, f := range found {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// nvrtcLib holds the NVRTC entry points. nvrtcProgram is a pointer;
// nvrtcResult a C enum.
type nvrtcLib struct {
	nvrtcVersion           func(major, minor *int32) int32
	nvrtcCreateProgram     func(prog *uintptr, src string, name string, numHeaders int32, headers, includeNames **byte) int32
	nvrtcCompileProgram    func(prog uintptr, numOptions int32, options **byte) int32
	nvrtcGetPTXSize        func(prog uintptr, size *uintptr) int32
	nvrtcGetPTX            func(prog uintptr, ptx *byte) int32
	nvrtcGetProgramLogSize func(prog uintptr, size *uintptr) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
	nvrtcGetErrorString    func(rc int32) string
	// Optional (NVRTC 11.1 and later).
	nvrtcGetCUBINSize         func(prog uintptr, size *uintptr) int32
	nvrtcGetCUBIN             func(prog uintptr, cubin *byte) int32
	nvrtcGetNumSupportedArchs func(n *int32) int32
	nvrtcGetSupportedArchs    func(archs *int32) int32

	file         string // the library file that loaded
	major, minor int
}

// openWithSiblings is openFirst for libraries that load companions by
// name (NVRTC its builtins library when it compiles, cuBLAS cublasLt when
// it loads): before a candidate given by full path, the companions in
// the same directory are loaded globally, so that the loader finds them
// already loaded even when that directory is on no search path.
func openWithSiblings(names []string, sibling string) (uintptr, []string, error) {
	var tried []string
	var err error
	for _, name := range names {
		if filepath.IsAbs(name) {
			matches, _ := filepath.Glob(filepath.Join(filepath.Dir(name), sibling+"*"))
			for _, m := range matches {
				purego.Dlopen(m, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			}
		}
		var lib uintptr
		var t []string
		lib, t, err = openFirst([]string{name})
		tried = append(tried, t...)
		if err == nil {
			return lib, tried, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("no candidate library names")
	}
	return 0, tried, err
}

func loadNVRTC() (*nvrtcLib, error) {
	names := libraryCandidates(nvrtcLibraries, "libnvrtc.so", searchDirs(), filepath.Glob)
	lib, tried, err := openWithSiblings(names, "libnvrtc-builtins.so")
	if err != nil {
		return nil, fmt.Errorf("%w: no NVRTC library (tried %s: %v); install the CUDA toolkit's NVRTC (e.g. the cuda-nvrtc package) or add its directory to LD_LIBRARY_PATH",
			ErrUnavailable, strings.Join(tried, ", "), err)
	}
	n := &nvrtcLib{file: tried[len(tried)-1]}
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"nvrtcVersion", &n.nvrtcVersion},
		{"nvrtcCreateProgram", &n.nvrtcCreateProgram},
		{"nvrtcCompileProgram", &n.nvrtcCompileProgram},
		{"nvrtcGetPTXSize", &n.nvrtcGetPTXSize},
		{"nvrtcGetPTX", &n.nvrtcGetPTX},
		{"nvrtcGetProgramLogSize", &n.nvrtcGetProgramLogSize},
		{"nvrtcGetProgramLog", &n.nvrtcGetProgramLog},
		{"nvrtcDestroyProgram", &n.nvrtcDestroyProgram},
		{"nvrtcGetErrorString", &n.nvrtcGetErrorString},
	} {
		if err := register(lib, n.file, s.name, s.fn); err != nil {
			return nil, err
		}
	}
	registerOptional(lib, "nvrtcGetCUBINSize", &n.nvrtcGetCUBINSize)
	registerOptional(lib, "nvrtcGetCUBIN", &n.nvrtcGetCUBIN)
	if registerOptional(lib, "nvrtcGetNumSupportedArchs", &n.nvrtcGetNumSupportedArchs) {
		if !registerOptional(lib, "nvrtcGetSupportedArchs", &n.nvrtcGetSupportedArchs) {
			n.nvrtcGetNumSupportedArchs = nil
		}
	}
	if n.nvrtcGetCUBIN == nil {
		n.nvrtcGetCUBINSize = nil
	}
	var major, minor int32
	if rc := n.nvrtcVersion(&major, &minor); rc != 0 {
		return nil, fmt.Errorf("%w: nvrtcVersion failed in %s: %s", ErrUnavailable, n.file, n.describe(rc))
	}
	n.major, n.minor = int(major), int(minor)
	return n, nil
}

func (n *nvrtcLib) describe(rc int32) string {
	return fmt.Sprintf("%s (%d)", n.nvrtcGetErrorString(rc), rc)
}

// version renders the NVRTC version, e.g. "12.4".
func (n *nvrtcLib) version() string { return fmt.Sprintf("%d.%d", n.major, n.minor) }

// supportedArchs lists the compute capabilities NVRTC compiles for (as
// 10·major+minor, ascending), or nil when it cannot say.
func (n *nvrtcLib) supportedArchs() []int {
	if n.nvrtcGetNumSupportedArchs == nil {
		return nil
	}
	var count int32
	if n.nvrtcGetNumSupportedArchs(&count) != 0 || count <= 0 || count > 1024 {
		return nil
	}
	archs := make([]int32, count)
	if n.nvrtcGetSupportedArchs(&archs[0]) != 0 {
		return nil
	}
	out := make([]int, len(archs))
	for i, a := range archs {
		out[i] = int(a)
	}
	slices.Sort(out)
	return out
}

// pickArch returns the architecture to compile PTX for: the device's own
// when NVRTC supports it, else the newest NVRTC supports below it (the
// driver JIT-compiles older PTX for newer GPUs). ok is false when NVRTC
// supports nothing at or below the device.
func pickArch(device int, supported []int) (arch int, exact, ok bool) {
	if supported == nil {
		return device, true, true
	}
	best := -1
	for _, a := range supported {
		if a == device {
			return a, true, true
		}
		if a < device && a > best {
			best = a
		}
	}
	if best < 0 {
		return 0, false, false
	}
	return best, false, true
}

// compiled is NVRTC's output for one source.
type compiled struct {
	image []byte // NUL-terminated PTX, or a CUBIN
	log   string
}

// compile compiles source with options; cubin asks for a CUBIN (machine
// code for the exact architecture) instead of PTX.
func (n *nvrtcLib) compile(source, name string, options []string, cubin bool) (compiled, error) {
	var prog uintptr
	if rc := n.nvrtcCreateProgram(&prog, source, name, 0, nil, nil); rc != 0 {
		return compiled{}, fmt.Errorf("cuda: nvrtcCreateProgram(%s): %s", name, n.describe(rc))
	}
	defer n.nvrtcDestroyProgram(&prog)
	// The options as C strings: NUL-terminated copies, and an array of
	// pointers to them; both stay referenced until the call returns.
	bufs := make([][]byte, len(options))
	ptrs := make([]*byte, len(options)+1)
	for i, o := range options {
		bufs[i] = append([]byte(o), 0)
		ptrs[i] = &bufs[i][0]
	}
	rc := n.nvrtcCompileProgram(prog, int32(len(options)), &ptrs[0])
	log := n.programLog(prog)
	if rc != 0 {
		return compiled{log: log}, fmt.Errorf("cuda: nvrtcCompileProgram(%s, %s): %s; log:\n%s", name, strings.Join(options, " "), n.describe(rc), log)
	}
	getSize, get := n.nvrtcGetPTXSize, n.nvrtcGetPTX
	what := "nvrtcGetPTX"
	if cubin {
		if n.nvrtcGetCUBIN == nil {
			return compiled{}, fmt.Errorf("cuda: NVRTC %s cannot emit CUBIN", n.version())
		}
		getSize, get, what = n.nvrtcGetCUBINSize, n.nvrtcGetCUBIN, "nvrtcGetCUBIN"
	}
	var size uintptr
	if rc := getSize(prog, &size); rc != 0 {
		return compiled{}, fmt.Errorf("cuda: %sSize(%s): %s", what, name, n.describe(rc))
	}
	if size == 0 || size > 1<<30 {
		return compiled{}, fmt.Errorf("cuda: %sSize(%s) gave %d bytes", what, name, size)
	}
	image := make([]byte, size+1) // +1: PTX stays NUL-terminated even if NVRTC's size left it out
	if rc := get(prog, &image[0]); rc != 0 {
		return compiled{}, fmt.Errorf("cuda: %s(%s): %s", what, name, n.describe(rc))
	}
	return compiled{image: image[:size+1], log: log}, nil
}

func (n *nvrtcLib) programLog(prog uintptr) string {
	var size uintptr
	if n.nvrtcGetProgramLogSize(prog, &size) != 0 || size <= 1 || size > 1<<24 {
		return ""
	}
	buf := make([]byte, size)
	if n.nvrtcGetProgramLog(prog, &buf[0]) != 0 {
		return ""
	}
	return cString(buf)
}

// cublasLib holds the cuBLAS entry points (the _v2 API). cublasHandle_t is
// a pointer; cublasStatus_t and cublasOperation_t C enums; device
// pointers uintptr; alpha and beta are read from host memory (the default
// CUBLAS_POINTER_MODE_HOST) before the call returns.
type cublasLib struct {
	cublasCreate    func(h *uintptr) int32
	cublasDestroy   func(h uintptr) int32
	cublasSetStream func(h uintptr, s uintptr) int32
	cublasSgemm     func(h uintptr, transa, transb int32, m, n, k int32,
		alpha *float32, a uintptr, lda int32, b uintptr, ldb int32,
		beta *float32, c uintptr, ldc int32) int32
	cublasSgemmStridedBatched func(h uintptr, transa, transb int32, m, n, k int32,
		alpha *float32, a uintptr, lda int32, strideA int64, b uintptr, ldb int32, strideB int64,
		beta *float32, c uintptr, ldc int32, strideC int64, batch int32) int32
	// Optional (cuBLAS 11.4.2 and later).
	cublasGetStatusName func(rc int32) string
	// Optional (cuBLAS 11 and later), for TF32 and BF16 products.
	cublasSetMathMode func(h uintptr, mode int32) int32
	cublasGemmEx      func(h uintptr, transa, transb int32, m, n, k int32,
		alpha *float32, a uintptr, atype, lda int32, b uintptr, btype, ldb int32,
		beta *float32, c uintptr, ctype, ldc int32, compute, algo int32) int32
	cublasGemmStridedBatchedEx func(h uintptr, transa, transb int32, m, n, k int32,
		alpha *float32, a uintptr, atype, lda int32, strideA int64, b uintptr, btype, ldb int32, strideB int64,
		beta *float32, c uintptr, ctype, ldc int32, strideC int64, batch, compute, algo int32) int32

	file string
}

// cuBLAS operations (cublasOperation_t).
const (
	cublasOpN = 0
	cublasOpT = 1
)

// cuBLAS math modes (cublasMath_t), the float32 data type
// (cudaDataType_t), the bfloat16-operand compute type
// (cublasComputeType_t) and the default algorithm (cublasGemmAlgo_t).
const (
	cublasDefaultMath        = 0
	cublasTF32Math           = 3
	cudaR32F                 = 0
	cublasCompute32FFast16BF = 75
	cublasGemmDefault        = -1
)

func loadCUBLAS() (*cublasLib, error) {
	names := libraryCandidates(cublasLibraries, "libcublas.so", searchDirs(), filepath.Glob)
	lib, tried, err := openWithSiblings(names, "libcublasLt.so")
	if err != nil {
		return nil, fmt.Errorf("%w: no cuBLAS library (tried %s: %v); install the CUDA toolkit's cuBLAS (e.g. the libcublas package) or add its directory to LD_LIBRARY_PATH",
			ErrUnavailable, strings.Join(tried, ", "), err)
	}
	b := &cublasLib{file: tried[len(tried)-1]}
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"cublasCreate_v2", &b.cublasCreate},
		{"cublasDestroy_v2", &b.cublasDestroy},
		{"cublasSetStream_v2", &b.cublasSetStream},
		{"cublasSgemm_v2", &b.cublasSgemm},
		{"cublasSgemmStridedBatched", &b.cublasSgemmStridedBatched},
	} {
		if err := register(lib, b.file, s.name, s.fn); err != nil {
			return nil, err
		}
	}
	registerOptional(lib, "cublasGetStatusName", &b.cublasGetStatusName)
	registerOptional(lib, "cublasSetMathMode", &b.cublasSetMathMode)
	registerOptional(lib, "cublasGemmEx", &b.cublasGemmEx)
	registerOptional(lib, "cublasGemmStridedBatchedEx", &b.cublasGemmStridedBatchedEx)
	return b, nil
}

func (b *cublasLib) describe(rc int32) string {
	if b.cublasGetStatusName != nil {
		return fmt.Sprintf("%s (%d)", b.cublasGetStatusName(rc), rc)
	}
	return fmt.Sprintf("%s (%d)", cublasStatusName(rc), rc)
}

// cublasStatusName names cublasStatus_t values.
func cublasStatusName(rc int32) string {
	switch rc {
	case 0:
		return "CUBLAS_STATUS_SUCCESS"
	case 1:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case 3:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case 7:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case 8:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case 11:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case 13:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case 14:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case 15:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	case 16:
		return "CUBLAS_STATUS_LICENSE_ERROR"
	}
	return "CUBLAS_STATUS_UNKNOWN"
}
