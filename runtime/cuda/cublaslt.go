package cuda

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unsafe"
)

// cuBLASLt is optional: without it products keep cuBLAS, with the bias
// and activation as separate work, and Context.EpilogueError says why.
// It is looked for like cuBLAS, which ships it alongside.
var ltLibraries = []string{"libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12"}

// cuBLASLt constants, from cublasLt.h (cublasLtMatmulDescAttributes_t,
// cublasLtEpilogue_t, cublasLtMatmulPreferenceAttributes_t) and
// cublas_api.h (cublasComputeType_t).
const (
	ltDescTransA         = 3  // CUBLASLT_MATMUL_DESC_TRANSA, int32_t
	ltDescTransB         = 4  // CUBLASLT_MATMUL_DESC_TRANSB, int32_t
	ltDescEpilogue       = 7  // CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t
	ltDescBiasPointer    = 8  // CUBLASLT_MATMUL_DESC_BIAS_POINTER, const void*
	ltPrefMaxWorkspace   = 1  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t
	ltEpilogueDefault    = 1  // CUBLASLT_EPILOGUE_DEFAULT
	ltEpilogueRelu       = 2  // CUBLASLT_EPILOGUE_RELU
	ltEpilogueBias       = 4  // CUBLASLT_EPILOGUE_BIAS
	ltEpilogueReluBias   = 6  // CUBLASLT_EPILOGUE_RELU_BIAS (RELU | BIAS)
	ltEpilogueGelu       = 32 // CUBLASLT_EPILOGUE_GELU (the tanh approximation)
	ltEpilogueGeluBias   = 36 // CUBLASLT_EPILOGUE_GELU_BIAS (GELU | BIAS)
	cublasCompute32F     = 68 // CUBLAS_COMPUTE_32F
	cublasCompute32FTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32
	// cublasStatusNotSupported is CUBLAS_STATUS_NOT_SUPPORTED.
	cublasStatusNotSupported = 15
	// ltMaxWorkspace caps the workspace an algorithm may ask for.
	ltMaxWorkspace = 32 << 20
	// ltRequested is how many algorithms the heuristic is asked for.
	ltRequested = 8
)

// ltLib holds the cuBLASLt entry points. Handles, descriptors and
// layouts are pointers, cublasStatus_t and the enums C ints, size_t
// uintptr; alpha and beta point to host floats (scale type CUDA_R_32F).
type ltLib struct {
	cublasLtCreate                       func(h *uintptr) int32
	cublasLtDestroy                      func(h uintptr) int32
	cublasLtMatmulDescCreate             func(d *uintptr, compute, scale int32) int32
	cublasLtMatmulDescSetAttribute       func(d uintptr, attr int32, buf *byte, size uintptr) int32
	cublasLtMatmulDescDestroy            func(d uintptr) int32
	cublasLtMatrixLayoutCreate           func(l *uintptr, dtype int32, rows, cols uint64, ld int64) int32
	cublasLtMatrixLayoutDestroy          func(l uintptr) int32
	cublasLtMatmulPreferenceCreate       func(p *uintptr) int32
	cublasLtMatmulPreferenceSetAttribute func(p uintptr, attr int32, buf *byte, size uintptr) int32
	cublasLtMatmulPreferenceDestroy      func(p uintptr) int32
	cublasLtMatmulAlgoGetHeuristic       func(h, desc, a, b, c, d, pref uintptr, requested int32, results *ltHeuristic, returned *int32) int32
	cublasLtMatmul                       func(h, desc uintptr, alpha *float32, a, ad, b, bd uintptr, beta *float32,
		c, cd, d, dd uintptr, algo *ltAlgo, ws, wsBytes, stream uintptr) int32

	file string
}

// ltAlgo is cublasLtMatmulAlgo_t: 8 opaque uint64s.
type ltAlgo [8]uint64

// ltHeuristic is cublasLtMatmulHeuristicResult_t: the algorithm, its
// workspace (size_t), its status, the waves count (float) and four
// reserved ints: 96 bytes.
type ltHeuristic struct {
	algo      ltAlgo
	workspace uint64
	state     int32
	_         float32
	_         [4]int32
}

func loadCUBLASLt() (*ltLib, error) {
	names := libraryCandidates(ltLibraries, "libcublasLt.so", searchDirs(), filepath.Glob)
	lib, tried, err := openFirst(names)
	if err != nil {
		return nil, fmt.Errorf("%w: no cuBLASLt library (tried %s: %v)", ErrUnavailable, strings.Join(tried, ", "), err)
	}
	l := &ltLib{file: tried[len(tried)-1]}
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"cublasLtCreate", &l.cublasLtCreate},
		{"cublasLtDestroy", &l.cublasLtDestroy},
		{"cublasLtMatmulDescCreate", &l.cublasLtMatmulDescCreate},
		{"cublasLtMatmulDescSetAttribute", &l.cublasLtMatmulDescSetAttribute},
		{"cublasLtMatmulDescDestroy", &l.cublasLtMatmulDescDestroy},
		{"cublasLtMatrixLayoutCreate", &l.cublasLtMatrixLayoutCreate},
		{"cublasLtMatrixLayoutDestroy", &l.cublasLtMatrixLayoutDestroy},
		{"cublasLtMatmulPreferenceCreate", &l.cublasLtMatmulPreferenceCreate},
		{"cublasLtMatmulPreferenceSetAttribute", &l.cublasLtMatmulPreferenceSetAttribute},
		{"cublasLtMatmulPreferenceDestroy", &l.cublasLtMatmulPreferenceDestroy},
		{"cublasLtMatmulAlgoGetHeuristic", &l.cublasLtMatmulAlgoGetHeuristic},
		{"cublasLtMatmul", &l.cublasLtMatmul},
	} {
		if err := register(lib, l.file, s.name, s.fn); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// lt is a Context's cuBLASLt state: the handle and, per epilogue shape,
// its descriptors and chosen algorithm.
type lt struct {
	lib   *ltLib
	err   error // why there is no cuBLASLt (lib is nil then)
	h     uintptr
	plans map[epilogueKey]*ltPlan
}

// ltPlan is one epilogue shape prepared for cuBLASLt.
type ltPlan struct {
	desc, a, b, d uintptr
	algo          ltAlgo
	wsBytes       int
}

func (l *lt) check(call string, rc int32) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s: %s (%d)", call, cublasStatusName(rc), rc)
}

// ltEpilogue is cublasLtEpilogue_t for a bias and an activation.
func ltEpilogue(bias bool, act Activation) uint32 {
	switch {
	case bias && act == ActRelu:
		return ltEpilogueReluBias
	case bias && act == ActGeluTanh:
		return ltEpilogueGeluBias
	case bias:
		return ltEpilogueBias
	case act == ActRelu:
		return ltEpilogueRelu
	case act == ActGeluTanh:
		return ltEpilogueGelu
	}
	return ltEpilogueDefault
}

// ltCompute is the compute type of a precision, as the cuBLAS path uses:
// float32, TF32 tensor cores, or bfloat16 operands.
func ltCompute(p Precision) int32 {
	switch p {
	case TF32:
		return cublasCompute32FTF32
	case BF16:
		return cublasCompute32FFast16BF
	}
	return cublasCompute32F
}

// Attribute values go to cuBLASLt as a pointer and a size; each lives
// in its own allocation until the call returns.
func i32Bytes(v int32) (*byte, uintptr)  { return (*byte)(unsafe.Pointer(&v)), 4 }
func u32Bytes(v uint32) (*byte, uintptr) { return (*byte)(unsafe.Pointer(&v)), 4 }
func u64Bytes(v uint64) (*byte, uintptr) { return (*byte)(unsafe.Pointer(&v)), 8 }

// describe creates g's descriptors: the operation (compute type,
// transpositions, epilogue) and the layouts of A, B and D (C is D).
func (l *lt) describe(g *EpilogueGemm) (*ltPlan, error) {
	p := &ltPlan{}
	f := l.lib
	op := func(t bool) int32 {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	rowsA, colsA, rowsB, colsB := g.M, g.K, g.K, g.N
	if g.TransA {
		rowsA, colsA = g.K, g.M
	}
	if g.TransB {
		rowsB, colsB = g.N, g.K
	}
	steps := []struct {
		call string
		rc   func() int32
	}{
		{"cublasLtMatmulDescCreate", func() int32 { return f.cublasLtMatmulDescCreate(&p.desc, ltCompute(g.Precision), cudaR32F) }},
		{"cublasLtMatmulDescSetAttribute(TRANSA)", func() int32 {
			b, n := i32Bytes(op(g.TransA))
			return f.cublasLtMatmulDescSetAttribute(p.desc, ltDescTransA, b, n)
		}},
		{"cublasLtMatmulDescSetAttribute(TRANSB)", func() int32 {
			b, n := i32Bytes(op(g.TransB))
			return f.cublasLtMatmulDescSetAttribute(p.desc, ltDescTransB, b, n)
		}},
		{"cublasLtMatmulDescSetAttribute(EPILOGUE)", func() int32 {
			b, n := u32Bytes(ltEpilogue(g.HasBias, g.Act))
			return f.cublasLtMatmulDescSetAttribute(p.desc, ltDescEpilogue, b, n)
		}},
		{"cublasLtMatrixLayoutCreate(A)", func() int32 {
			return f.cublasLtMatrixLayoutCreate(&p.a, cudaR32F, uint64(rowsA), uint64(colsA), int64(g.LDA))
		}},
		{"cublasLtMatrixLayoutCreate(B)", func() int32 {
			return f.cublasLtMatrixLayoutCreate(&p.b, cudaR32F, uint64(rowsB), uint64(colsB), int64(g.LDB))
		}},
		{"cublasLtMatrixLayoutCreate(D)", func() int32 {
			return f.cublasLtMatrixLayoutCreate(&p.d, cudaR32F, uint64(g.M), uint64(g.N), int64(g.LDC))
		}},
	}
	for _, s := range steps {
		if err := l.check(s.call, s.rc()); err != nil {
			l.destroy(p)
			return nil, fmt.Errorf("%w (%s)", err, g)
		}
	}
	return p, nil
}

// destroy releases a plan's descriptors (those created).
func (l *lt) destroy(p *ltPlan) {
	for _, d := range []uintptr{p.a, p.b, p.d} {
		if d != 0 {
			l.lib.cublasLtMatrixLayoutDestroy(d)
		}
	}
	if p.desc != 0 {
		l.lib.cublasLtMatmulDescDestroy(p.desc)
	}
}

// heuristic asks cuBLASLt for its algorithms for p, best first, those
// with a failed state or a workspace over ltMaxWorkspace left out. A
// NOT_SUPPORTED answer (no kernel for this epilogue) wraps ErrNoEpilogue.
func (l *lt) heuristic(p *ltPlan, g *EpilogueGemm) ([]ltHeuristic, error) {
	var pref uintptr
	if err := l.check("cublasLtMatmulPreferenceCreate", l.lib.cublasLtMatmulPreferenceCreate(&pref)); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, g)
	}
	defer l.lib.cublasLtMatmulPreferenceDestroy(pref)
	b, n := u64Bytes(ltMaxWorkspace)
	if err := l.check("cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", l.lib.cublasLtMatmulPreferenceSetAttribute(pref, ltPrefMaxWorkspace, b, n)); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, g)
	}
	results := make([]ltHeuristic, ltRequested)
	var returned int32
	rc := l.lib.cublasLtMatmulAlgoGetHeuristic(l.h, p.desc, p.a, p.b, p.d, p.d, pref, ltRequested, &results[0], &returned)
	if rc == cublasStatusNotSupported {
		return nil, fmt.Errorf("cuda: cublasLtMatmulAlgoGetHeuristic: %w: %s (%s)", ErrNoEpilogue, cublasStatusName(rc), g)
	}
	if err := l.check("cublasLtMatmulAlgoGetHeuristic", rc); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, g)
	}
	var ok []ltHeuristic
	for _, r := range results[:min(max(returned, 0), ltRequested)] {
		if r.state == 0 && r.workspace <= ltMaxWorkspace {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("cuda: cublasLtMatmulAlgoGetHeuristic: %w: no algorithm within %d bytes of workspace (%s)", ErrNoEpilogue, ltMaxWorkspace, g)
	}
	return ok, nil
}

// EpilogueError is nil when cuBLASLt is loaded, else why it is not.
func (c *Context) EpilogueError() error { return c.lt.err }

// PrepareEpilogue chooses g's algorithm, once per shape.
func (c *Context) PrepareEpilogue(g *EpilogueGemm) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	_, err = c.ltPlan(g)
	return err
}

// ltPlan returns g's plan, making it unless capturing: the heuristic
// and the workspace's allocation are no work a capture may record.
func (c *Context) ltPlan(g *EpilogueGemm) (*ltPlan, error) {
	l := &c.lt
	if l.lib == nil {
		return nil, l.err
	}
	if err := g.checkShape(); err != nil {
		return nil, err
	}
	key := g.key()
	if p := l.plans[key]; p != nil {
		return p, nil
	}
	if c.capturing {
		return nil, fmt.Errorf("cuda: %s was not prepared before the capture began", g)
	}
	p, err := l.describe(g)
	if err != nil {
		return nil, err
	}
	results, err := l.heuristic(p, g)
	if err != nil {
		l.destroy(p)
		return nil, err
	}
	var allocErrs []error
	for i, r := range results {
		if err := c.growWorkspace(int(r.workspace)); err != nil {
			allocErrs = append(allocErrs, fmt.Errorf("algorithm %d: %w", i, err))
			continue
		}
		p.algo, p.wsBytes = r.algo, int(r.workspace)
		if l.plans == nil {
			l.plans = map[epilogueKey]*ltPlan{}
		}
		l.plans[key] = p
		return p, nil
	}
	l.destroy(p)
	return nil, fmt.Errorf("cuda: %w: no cuBLASLt workspace for %s: %w", ErrNoEpilogue, g, errors.Join(allocErrs...))
}

// EpilogueGemm queues cublasLtMatmul with g's epilogue. The bias
// pointer is host-side descriptor state, set before each call.
func (c *Context) EpilogueGemm(g *EpilogueGemm) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	p, err := c.ltPlan(g)
	if err != nil {
		return err
	}
	if err := g.check(&c.allocs); err != nil {
		return err
	}
	l := &c.lt
	if g.HasBias {
		b, n := u64Bytes(uint64(g.Bias))
		if err := l.check("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", l.lib.cublasLtMatmulDescSetAttribute(p.desc, ltDescBiasPointer, b, n)); err != nil {
			return fmt.Errorf("%w (%s)", err, g)
		}
	}
	alpha, beta := g.Alpha, float32(0)
	d := uintptr(g.C)
	rc := l.lib.cublasLtMatmul(l.h, p.desc, &alpha, uintptr(g.A), p.a, uintptr(g.B), p.b, &beta, d, p.d, d, p.d,
		&p.algo, uintptr(c.dnn.ws), uintptr(p.wsBytes), c.stream)
	if err := l.check("cublasLtMatmul", rc); err != nil {
		return fmt.Errorf("%w (%s)", err, g)
	}
	return nil
}

// close releases the plans and the handle.
func (l *lt) close() []error {
	if l.lib == nil {
		return nil
	}
	for _, p := range l.plans {
		l.destroy(p)
	}
	l.plans = nil
	if l.h != 0 {
		return []error{l.check("cublasLtDestroy", l.lib.cublasLtDestroy(l.h))}
	}
	return nil
}

var _ EpilogueGemmer = (*Context)(nil)
