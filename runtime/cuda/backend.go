package cuda

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
	"unsafe"
)

// Ptr is a device address (CUdeviceptr). 0 is no buffer: kernels take it
// for an absent optional operand.
type Ptr uint64

// Offset returns the address elems float32 elements past p.
func (p Ptr) Offset(elems int) Ptr { return p + Ptr(4*elems) }

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z uint32 }

// Backend is what the runtime's CUDA executor needs from a GPU: device
// memory, kernels compiled from Sources, launches and GEMM on one stream,
// all in order. Context is the GPU; Emulator runs the same kernels on the
// CPU for tests. Methods may be called from any goroutine, one at a time.
type Backend interface {
	Device() Device
	// Alloc returns bytes of device memory (bytes > 0).
	Alloc(bytes int) (Ptr, error)
	Free(p Ptr) error
	// HostToDevice copies bytes from host memory; src may be reused as
	// soon as it returns.
	HostToDevice(dst Ptr, src unsafe.Pointer, bytes int) error
	// DeviceToHost copies bytes to host memory after all work queued
	// before it has finished, and returns when they are there.
	DeviceToHost(dst unsafe.Pointer, src Ptr, bytes int) error
	DeviceToDevice(dst, src Ptr, bytes int) error
	// Function returns a kernel of a source, compiling the source on first
	// use.
	Function(src *Source, name string) (*Function, error)
	// Launch queues a kernel. The arguments must match the kernel's
	// parameters in number and kind.
	Launch(f *Function, grid, block Dim3, args *Args) error
	// Gemm queues a column-major matrix product with cuBLAS's semantics.
	Gemm(g *Gemm) error
	// Synchronize waits for all queued work and reports a failure of any
	// of it.
	Synchronize() error
	// Time runs fn, which queues work, and returns how long the device
	// took for that work.
	Time(fn func() error) (time.Duration, error)
	// ReductionThreads is the block size of the kernels that reduce
	// within a block: a power of two, at most MaxReductionThreads.
	ReductionThreads() int
	// Close releases everything the backend allocated.
	Close() error
}

// MaxReductionThreads is the size of the shared-memory arrays of the
// reduction kernels (RB_THREADS in the sources).
const MaxReductionThreads = 256

// Kind is the kind of a kernel parameter, as Go passes it.
type Kind int

// Parameter kinds and the C types they stand for.
const (
	KindPtr    Kind = iota // any pointer: 8 bytes
	KindI64                // long long
	KindI32                // int
	KindF32                // float
	KindShape8             // struct Shape8 { long long v[8]; }: 64 bytes
)

func (k Kind) String() string {
	switch k {
	case KindPtr:
		return "pointer"
	case KindI64:
		return "long long"
	case KindI32:
		return "int"
	case KindF32:
		return "float"
	case KindShape8:
		return "Shape8"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Shape8 is the kernels' fixed-size integer array, passed by value.
type Shape8 [8]int64

// Args is a kernel's argument list. Each value lives in its own Go
// allocation, and params holds pointers to them, which is the layout
// cuLaunchKernel reads (kernelParams: an array of pointers to the values).
// A list is built once and may be launched any number of times.
type Args struct {
	kinds  []Kind
	params []unsafe.Pointer
	ptrs   []Ptr // the pointer arguments, for checks
	err    error
}

// NewArgs starts an argument list.
func NewArgs() *Args { return &Args{} }

func (a *Args) add(k Kind, p unsafe.Pointer) *Args {
	a.kinds = append(a.kinds, k)
	a.params = append(a.params, p)
	return a
}

func (a *Args) fail(format string, args ...any) *Args {
	if a.err == nil {
		a.err = fmt.Errorf(format, args...)
	}
	return a.add(KindI32, unsafe.Pointer(new(int32)))
}

// Ptr appends a device pointer.
func (a *Args) Ptr(p Ptr) *Args {
	v := new(Ptr)
	*v = p
	a.ptrs = append(a.ptrs, p)
	return a.add(KindPtr, unsafe.Pointer(v))
}

// I64 appends a long long.
func (a *Args) I64(x int) *Args {
	v := new(int64)
	*v = int64(x)
	return a.add(KindI64, unsafe.Pointer(v))
}

// I32 appends an int; x must fit.
func (a *Args) I32(x int) *Args {
	if x < math.MinInt32 || x > math.MaxInt32 {
		return a.fail("argument %d: %d does not fit a C int", len(a.kinds), x)
	}
	v := new(int32)
	*v = int32(x)
	return a.add(KindI32, unsafe.Pointer(v))
}

// F32 appends a float.
func (a *Args) F32(x float32) *Args {
	v := new(float32)
	*v = x
	return a.add(KindF32, unsafe.Pointer(v))
}

// Shape appends a Shape8 holding xs (at most 8), the rest zero.
func (a *Args) Shape(xs []int) *Args {
	if len(xs) > len(Shape8{}) {
		return a.fail("argument %d: %d values do not fit a Shape8", len(a.kinds), len(xs))
	}
	v := new(Shape8)
	for i, x := range xs {
		v[i] = int64(x)
	}
	return a.add(KindShape8, unsafe.Pointer(v))
}

// Err reports a value that did not fit while the list was built.
func (a *Args) Err() error { return a.err }

// pointer returns the kernelParams array (nil for no arguments).
func (a *Args) pointer() unsafe.Pointer {
	if len(a.params) == 0 {
		return nil
	}
	return unsafe.Pointer(&a.params[0])
}

// Function is a kernel of a compiled source.
type Function struct {
	Name   string
	Source *Source
	Params []Param
	// Syncs says the kernel uses __syncthreads (its threads must run
	// together); Emulator runs such kernels on threads.
	Syncs  bool
	handle uintptr // CUfunction, or the emulator's entry point
}

// CheckArgs checks that args match the kernel's parameters in number and
// kind, and that every value fitted its kind.
func (f *Function) CheckArgs(args *Args) error {
	if args.err != nil {
		return fmt.Errorf("cuda: %s: %w", f.Name, args.err)
	}
	if len(args.kinds) != len(f.Params) {
		return fmt.Errorf("cuda: %s takes %d parameters, given %d arguments", f.Name, len(f.Params), len(args.kinds))
	}
	for i, p := range f.Params {
		if args.kinds[i] != p.Kind {
			return fmt.Errorf("cuda: %s parameter %d (%s %s) is a %s, given a %s", f.Name, i, p.Type, p.Name, p.Kind, args.kinds[i])
		}
	}
	return nil
}

// check validates a launch: arguments against the parameters, the grid
// and block against CUDA's limits, pointers against the allocations.
func (f *Function) check(grid, block Dim3, args *Args, allocs *allocTable) error {
	if err := f.CheckArgs(args); err != nil {
		return err
	}
	threads := uint64(block.X) * uint64(block.Y) * uint64(block.Z)
	switch {
	case grid.X == 0 || grid.Y == 0 || grid.Z == 0 || threads == 0:
		return fmt.Errorf("cuda: %s: empty launch (grid %v, block %v)", f.Name, grid, block)
	case grid.X > math.MaxInt32 || grid.Y > 65535 || grid.Z > 65535:
		return fmt.Errorf("cuda: %s: grid %v exceeds 2^31-1 × 65535 × 65535", f.Name, grid)
	case threads > 1024 || block.Z > 64:
		return fmt.Errorf("cuda: %s: block %v exceeds 1024 threads", f.Name, block)
	case f.Syncs && threads > MaxReductionThreads:
		return fmt.Errorf("cuda: %s: block %v exceeds the %d threads its shared arrays hold", f.Name, block, MaxReductionThreads)
	}
	for _, p := range args.ptrs {
		if p != 0 && !allocs.contains(p, 1) {
			return fmt.Errorf("cuda: %s: pointer argument %#x is in no allocation", f.Name, uint64(p))
		}
	}
	return nil
}

// Gemm is one cuBLAS-style product in column-major order,
// C = Alpha·op(A)·op(B) + Beta·C, with op(A) M×K, op(B) K×N and C M×N,
// element (i, j) of a matrix X at X[i + j·LDX], repeated Batch times
// (at least 1) with the operands advanced by their element strides.
type Gemm struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float32
	A, B, C                   Ptr
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int
	Batch                     int
	// Precision is how the operands are multiplied (FP32 by default).
	Precision Precision
}

// check validates dimensions the way cuBLAS does (it would answer
// CUBLAS_STATUS_INVALID_VALUE) and that every element each operand covers
// lies in one allocation.
func (g *Gemm) check(allocs *allocTable) error {
	rowsA, colsA := g.M, g.K
	if g.TransA {
		rowsA, colsA = g.K, g.M
	}
	rowsB, colsB := g.K, g.N
	if g.TransB {
		rowsB, colsB = g.N, g.K
	}
	switch {
	case g.M < 0 || g.N < 0 || g.K < 0 || g.Batch < 1:
		return fmt.Errorf("cuda: gemm: m=%d n=%d k=%d batch=%d", g.M, g.N, g.K, g.Batch)
	case g.LDA < max(1, rowsA) || g.LDB < max(1, rowsB) || g.LDC < max(1, g.M):
		return fmt.Errorf("cuda: gemm: leading dimensions lda=%d ldb=%d ldc=%d below the rows %d, %d, %d", g.LDA, g.LDB, g.LDC, rowsA, rowsB, g.M)
	}
	for _, x := range []int{g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, g.Batch} {
		if x > math.MaxInt32 {
			return fmt.Errorf("cuda: gemm: %d does not fit cuBLAS's int", x)
		}
	}
	for _, op := range []struct {
		name       string
		p          Ptr
		rows, cols int
		ld, stride int
	}{
		{"A", g.A, rowsA, colsA, g.LDA, g.StrideA},
		{"B", g.B, rowsB, colsB, g.LDB, g.StrideB},
		{"C", g.C, g.M, g.N, g.LDC, g.StrideC},
	} {
		if op.rows == 0 || op.cols == 0 || (op.name != "C" && g.M*g.N == 0) {
			continue
		}
		if op.stride < 0 {
			return fmt.Errorf("cuda: gemm: stride of %s is %d", op.name, op.stride)
		}
		last := (op.cols-1)*op.ld + op.rows + (g.Batch-1)*op.stride // elements spanned
		if !allocs.contains(op.p, 4*last) {
			return fmt.Errorf("cuda: gemm: %s (%#x, %d×%d, ld %d, stride %d, batch %d) is not inside one allocation", op.name, uint64(op.p), op.rows, op.cols, op.ld, op.stride, g.Batch)
		}
	}
	return nil
}

// allocTable records live allocations, to check that pointers handed to
// kernels and cuBLAS point into them.
type allocTable struct {
	spans []span // sorted by start
}

type span struct{ start, end Ptr }

func (t *allocTable) add(p Ptr, bytes int) {
	i := sort.Search(len(t.spans), func(i int) bool { return t.spans[i].start >= p })
	t.spans = slices.Insert(t.spans, i, span{p, p + Ptr(bytes)})
}

func (t *allocTable) remove(p Ptr) (int, bool) {
	i := sort.Search(len(t.spans), func(i int) bool { return t.spans[i].start >= p })
	if i == len(t.spans) || t.spans[i].start != p {
		return 0, false
	}
	size := int(t.spans[i].end - t.spans[i].start)
	t.spans = slices.Delete(t.spans, i, i+1)
	return size, true
}

// contains reports whether [p, p+bytes) lies inside one allocation.
func (t *allocTable) contains(p Ptr, bytes int) bool {
	i := sort.Search(len(t.spans), func(i int) bool { return t.spans[i].start > p }) - 1
	return i >= 0 && p >= t.spans[i].start && p+Ptr(bytes) <= t.spans[i].end
}

// find returns the allocation holding p.
func (t *allocTable) find(p Ptr) (span, bool) {
	i := sort.Search(len(t.spans), func(i int) bool { return t.spans[i].start > p }) - 1
	if i < 0 || p >= t.spans[i].end {
		return span{}, false
	}
	return t.spans[i], true
}

// all returns the allocation starts.
func (t *allocTable) all() []Ptr {
	out := make([]Ptr, len(t.spans))
	for i, s := range t.spans {
		out[i] = s.start
	}
	return out
}

// Copy helpers for float32 and int64 data.

// UploadFloats copies host floats to the device.
func UploadFloats(b Backend, dst Ptr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	return b.HostToDevice(dst, unsafe.Pointer(&src[0]), 4*len(src))
}

// DownloadFloats copies device floats to the host.
func DownloadFloats(b Backend, dst []float32, src Ptr) error {
	if len(dst) == 0 {
		return nil
	}
	return b.DeviceToHost(unsafe.Pointer(&dst[0]), src, 4*len(dst))
}

// UploadInt64s copies host int64s to the device.
func UploadInt64s(b Backend, dst Ptr, src []int64) error {
	if len(src) == 0 {
		return nil
	}
	return b.HostToDevice(dst, unsafe.Pointer(&src[0]), 8*len(src))
}
