//go:build linux || darwin || freebsd || netbsd

package cuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Emulator is a Backend that runs the kernel sources on the CPU, for
// tests where there is no GPU. Each source is compiled by the host C++
// compiler together with a small header that maps CUDA's built-ins onto
// C++ (threadIdx and friends become thread-local variables, __shared__
// arrays statics, __syncthreads a barrier), plus one entry point per
// kernel that unpacks the kernelParams array exactly as cuLaunchKernel
// does, by the types the kernel declares. Blocks run one after another;
// the threads of a block run one after another, or, for kernels with
// __shared__ memory, as that many OS threads meeting at a barrier. cuBLAS
// is a plain column-major loop that follows cuBLAS's definition.
//
// "Device" memory is host memory mapped with an inaccessible page right
// after every allocation, so a kernel that writes past the end of a
// buffer crashes the test instead of corrupting a neighbour, and new
// allocations are filled with NaN, so reading memory nothing wrote shows.
type Emulator struct {
	mu      sync.Mutex
	dir     string
	cxx     string
	allocs  allocTable
	mem     map[Ptr][]byte // allocation start → its bytes
	maps    map[Ptr][]byte // allocation start → the whole mapping
	libs    map[*Source]*emuLib
	entries map[*Function]emuEntry
	// recording is the graph being captured: Launch, Gemm, Conv and
	// DeviceToDevice append to it instead of running.
	recording *Graph
	graphs    map[*Graph]bool
	closed    bool
}

type emuLib struct {
	handle uintptr
	funcs  map[string]*Function
}

type emuEntry func(gx, gy, gz, bx, by, bz uint32, threaded int32, params unsafe.Pointer) int32

// emulatorThreads is the block size of reduction kernels under the
// emulator: small, because a block's threads are OS threads.
const emulatorThreads = 32

// OpenEmulator returns an emulator that builds its libraries in dir. It
// needs a C++ compiler ($CXX, g++, c++ or clang++); without one the error
// wraps ErrUnavailable.
func OpenEmulator(dir string) (*Emulator, error) {
	cxx := os.Getenv("CXX")
	if cxx == "" {
		for _, c := range []string{"g++", "c++", "clang++"} {
			if p, err := exec.LookPath(c); err == nil {
				cxx = p
				break
			}
		}
	}
	if cxx == "" {
		return nil, fmt.Errorf("%w: the emulator needs a C++ compiler (g++, c++ or clang++, or $CXX)", ErrUnavailable)
	}
	return &Emulator{dir: dir, cxx: cxx, mem: map[Ptr][]byte{}, maps: map[Ptr][]byte{},
		libs: map[*Source]*emuLib{}, entries: map[*Function]emuEntry{}, graphs: map[*Graph]bool{}}, nil
}

// Device describes the emulator.
func (e *Emulator) Device() Device {
	return Device{Name: "CPU emulator (" + filepath.Base(e.cxx) + ")"}
}

// ReductionThreads is small under the emulator, where threads are costly.
func (e *Emulator) ReductionThreads() int { return emulatorThreads }

func (e *Emulator) lock() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errors.New("cuda: the emulator is closed")
	}
	return nil
}

// Alloc maps bytes with a guard page after them, filled with NaN.
func (e *Emulator) Alloc(bytes int) (Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: Alloc(%d)", bytes)
	}
	if err := e.lock(); err != nil {
		return 0, err
	}
	defer e.mu.Unlock()
	page := os.Getpagesize()
	usable := (bytes + 15 + page - 1) / page * page
	m, err := syscall.Mmap(-1, 0, usable+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("cuda: emulator: mapping %d bytes: %w", bytes, err)
	}
	if err := syscall.Mprotect(m[usable:], syscall.PROT_NONE); err != nil {
		syscall.Munmap(m)
		return 0, fmt.Errorf("cuda: emulator: guard page: %w", err)
	}
	// Place the buffer against the guard page, 16-byte aligned.
	start := (usable - bytes) &^ 15
	region := m[start : start+bytes : start+bytes]
	nan := []byte{0x00, 0x00, 0xc0, 0x7f}
	for i := range region {
		region[i] = nan[i%4]
	}
	p := Ptr(uintptr(unsafe.Pointer(&region[0])))
	e.allocs.add(p, bytes)
	e.mem[p], e.maps[p] = region, m
	return p, nil
}

// Free unmaps an allocation.
func (e *Emulator) Free(p Ptr) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	return e.free(p)
}

func (e *Emulator) free(p Ptr) error {
	if _, ok := e.allocs.remove(p); !ok {
		return fmt.Errorf("cuda: Free(%#x): not an allocation", uint64(p))
	}
	m := e.maps[p]
	delete(e.mem, p)
	delete(e.maps, p)
	return syscall.Munmap(m)
}

// bytesAt returns the n bytes at p, which must lie in one allocation.
func (e *Emulator) bytesAt(p Ptr, n int) ([]byte, error) {
	if !e.allocs.contains(p, n) {
		return nil, fmt.Errorf("cuda: emulator: %d bytes at %#x are not inside one allocation", n, uint64(p))
	}
	sp, _ := e.allocs.find(p)
	off := int(p - sp.start)
	return e.mem[sp.start][off : off+n], nil
}

func (e *Emulator) floatsAt(p Ptr, n int) ([]float32, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := e.bytesAt(p, 4*n)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n), nil
}

// HostToDevice copies host bytes.
func (e *Emulator) HostToDevice(dst Ptr, src unsafe.Pointer, bytes int) error {
	if bytes == 0 {
		return nil
	}
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := e.notCapturing("HostToDevice"); err != nil {
		return err
	}
	d, err := e.bytesAt(dst, bytes)
	if err != nil {
		return err
	}
	copy(d, unsafe.Slice((*byte)(src), bytes))
	return nil
}

// DeviceToHost copies to host bytes.
func (e *Emulator) DeviceToHost(dst unsafe.Pointer, src Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := e.notCapturing("DeviceToHost"); err != nil {
		return err
	}
	s, err := e.bytesAt(src, bytes)
	if err != nil {
		return err
	}
	copy(unsafe.Slice((*byte)(dst), bytes), s)
	return nil
}

// DeviceToDevice copies between allocations.
func (e *Emulator) DeviceToDevice(dst, src Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	d, err := e.bytesAt(dst, bytes)
	if err != nil {
		return err
	}
	s, err := e.bytesAt(src, bytes)
	if err != nil {
		return err
	}
	return e.queue(func() error {
		copy(d, s)
		return nil
	})
}

// Function compiles the source with the host compiler on first use.
func (e *Emulator) Function(src *Source, name string) (*Function, error) {
	decl, err := src.Kernel(name)
	if err != nil {
		return nil, err
	}
	if err := e.lock(); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	lib := e.libs[src]
	if lib == nil {
		if lib, err = e.build(src); err != nil {
			return nil, err
		}
		e.libs[src] = lib
	}
	if f := lib.funcs[name]; f != nil {
		return f, nil
	}
	sym, err := purego.Dlsym(lib.handle, "rbemu_"+name)
	if err != nil || sym == 0 {
		return nil, fmt.Errorf("cuda: emulator: no entry point for %s: %v", name, err)
	}
	var entry emuEntry
	purego.RegisterFunc(&entry, sym)
	f := &Function{Name: name, Source: src, Params: decl.Params, Syncs: decl.Syncs, handle: sym}
	lib.funcs[name] = f
	e.entries[f] = entry
	return f, nil
}

// build compiles a source into a shared library and loads it.
func (e *Emulator) build(src *Source) (*emuLib, error) {
	text, err := EmulatorSource(src)
	if err != nil {
		return nil, err
	}
	base := filepath.Join(e.dir, "rbemu-"+src.Name)
	if err := os.WriteFile(base+".cpp", []byte(text), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(e.cxx, "-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-pthread",
		"-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-unused-function", "-Werror",
		"-o", base+".so", base+".cpp")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cuda: emulator: compiling source %s with %s: %v\n%s", src.Name, e.cxx, err, out)
	}
	h, err := purego.Dlopen(base+".so", purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("cuda: emulator: loading %s.so: %w", base, err)
	}
	return &emuLib{handle: h, funcs: map[string]*Function{}}, nil
}

// Launch runs a kernel to completion.
func (e *Emulator) Launch(f *Function, grid, block Dim3, args *Args) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := f.check(grid, block, args, &e.allocs); err != nil {
		return err
	}
	entry := e.entries[f]
	if entry == nil {
		return fmt.Errorf("cuda: emulator: %s is not one of its functions", f.Name)
	}
	threaded := int32(0)
	if f.Syncs {
		threaded = 1
	}
	return e.queue(func() error {
		rc := entry(grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, threaded, args.pointer())
		if rc != 0 {
			return fmt.Errorf("cuda: emulator: launching %s failed (%d)", f.Name, rc)
		}
		return nil
	})
}

// Gemm computes the product by its definition, column-major, with BLAS's
// rule that C is not read when beta is 0, the operands rounded to the
// product's precision.
func (e *Emulator) Gemm(g *Gemm) error {
	if g.M == 0 || g.N == 0 {
		return nil
	}
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := g.check(&e.allocs); err != nil {
		return err
	}
	copied := *g
	return e.queue(func() error { return e.gemm(&copied) })
}

func (e *Emulator) gemm(g *Gemm) error {
	rowsA, colsA, rowsB, colsB := g.M, g.K, g.K, g.N
	if g.TransA {
		rowsA, colsA = g.K, g.M
	}
	if g.TransB {
		rowsB, colsB = g.N, g.K
	}
	span := func(rows, cols, ld int) int {
		if rows == 0 || cols == 0 {
			return 0
		}
		return (cols-1)*ld + rows
	}
	acc := make([]float64, g.M)
	for batch := range g.Batch {
		a, err := e.floatsAt(g.A.Offset(batch*g.StrideA), span(rowsA, colsA, g.LDA))
		if err != nil {
			return err
		}
		b, err := e.floatsAt(g.B.Offset(batch*g.StrideB), span(rowsB, colsB, g.LDB))
		if err != nil {
			return err
		}
		c, err := e.floatsAt(g.C.Offset(batch*g.StrideC), span(g.M, g.N, g.LDC))
		if err != nil {
			return err
		}
		// The tensor cores' operand rounding (Precision), on copies.
		a, b = g.Precision.rounded(a), g.Precision.rounded(b)
		for j := range g.N {
			clear(acc)
			for l := range g.K {
				bv := b[l+j*g.LDB]
				if g.TransB {
					bv = b[j+l*g.LDB]
				}
				if g.TransA {
					for i := range g.M {
						acc[i] += float64(a[l+i*g.LDA]) * float64(bv)
					}
				} else {
					col := a[l*g.LDA : l*g.LDA+g.M]
					for i, av := range col {
						acc[i] += float64(av) * float64(bv)
					}
				}
			}
			for i := range g.M {
				v := g.Alpha * float32(acc[i])
				if g.Beta != 0 {
					v += g.Beta * c[i+j*g.LDC]
				}
				c[i+j*g.LDC] = v
			}
		}
	}
	return nil
}

// Synchronize has nothing to wait for: the emulator runs work as it is
// queued.
func (e *Emulator) Synchronize() error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	return e.notCapturing("Synchronize")
}

// Time measures fn on the wall clock.
func (e *Emulator) Time(fn func() error) (time.Duration, error) {
	start := time.Now()
	err := fn()
	return time.Since(start), err
}

// Close unmaps every allocation and unloads the libraries.
func (e *Emulator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.recording, e.graphs = nil, nil
	var errs []error
	for _, p := range e.allocs.all() {
		errs = append(errs, e.free(p))
	}
	for _, lib := range e.libs {
		errs = append(errs, purego.Dlclose(lib.handle))
	}
	e.libs, e.entries = nil, nil
	return errors.Join(errs...)
}

// Allocations reports the live allocations, for leak checks.
func (e *Emulator) Allocations() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.allocs.spans)
}

var _ Backend = (*Emulator)(nil)

// queue runs op now, or records it while a capture is under way.
func (e *Emulator) queue(op func() error) error {
	if e.recording != nil {
		e.recording.ops = append(e.recording.ops, op)
		return nil
	}
	return op()
}

func (e *Emulator) notCapturing(call string) error {
	if e.recording != nil {
		return fmt.Errorf("cuda: emulator: %s while the stream is being captured", call)
	}
	return nil
}

// ConvError is nil: the emulator always convolves.
func (e *Emulator) ConvError() error { return nil }

// PrepareConv only checks c's sizes: the emulator has one algorithm.
func (e *Emulator) PrepareConv(c *Convolution) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	return c.checkShape()
}

// Conv computes the convolution by cuDNN's definition.
func (e *Emulator) Conv(c *Convolution) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if err := c.check(&e.allocs); err != nil {
		return err
	}
	nx, nw, ny := c.elems()
	x, _ := e.floatsAt(c.X, nx)
	w, _ := e.floatsAt(c.Filter, nw)
	y, _ := e.floatsAt(c.Y, ny)
	var bias []float32
	if c.Bias != 0 {
		bias, _ = e.floatsAt(c.Bias, c.Filters)
	}
	copied := *c
	return e.queue(func() error {
		convolve(&copied, x, w, bias, y)
		return nil
	})
}

// CaptureError is nil: the emulator records launches to replay them.
func (e *Emulator) CaptureError() error { return nil }

// BeginCapture starts recording.
func (e *Emulator) BeginCapture() error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if e.recording != nil {
		return errors.New("cuda: emulator: BeginCapture: a capture is already under way")
	}
	e.recording = &Graph{}
	return nil
}

// EndCapture stops recording and returns what was recorded.
func (e *Emulator) EndCapture() (*Graph, error) {
	if err := e.lock(); err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	g := e.recording
	if g == nil {
		return nil, errors.New("cuda: emulator: EndCapture: no capture is under way")
	}
	e.recording = nil
	e.graphs[g] = true
	return g, nil
}

// Replay runs the recorded work in order.
func (e *Emulator) Replay(g *Graph) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if !e.graphs[g] {
		return errors.New("cuda: emulator: Replay: not a live graph of this emulator")
	}
	for _, op := range g.ops {
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}

// DestroyGraph forgets a graph.
func (e *Emulator) DestroyGraph(g *Graph) error {
	if err := e.lock(); err != nil {
		return err
	}
	defer e.mu.Unlock()
	if !e.graphs[g] {
		return errors.New("cuda: emulator: DestroyGraph: not a live graph of this emulator")
	}
	delete(e.graphs, g)
	return nil
}

var (
	_ Convolver = (*Emulator)(nil)
	_ Capturer  = (*Emulator)(nil)
)
