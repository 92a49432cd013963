package cuda

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Context is device 0 opened for work: its primary CUDA context, one
// stream that every copy, kernel and cuBLAS call goes to (so they run in
// the order they are issued), a cuBLAS handle bound to that stream, and
// the modules compiled so far. It implements Backend.
//
// A CUDA context is current per OS thread, and goroutines move between
// threads, so every method locks its goroutine to its thread and makes the
// context current before calling the driver. The primary context (rather
// than one from cuCtxCreate) is the one the CUDA runtime inside cuBLAS
// uses, so cuBLAS and our kernels share memory and the stream.
type Context struct {
	mu      sync.Mutex
	drv     *driver
	nvrtc   *nvrtcLib
	blas    *cublasLib
	dev     Device
	device  int32 // CUdevice
	ctx     uintptr
	stream  uintptr
	handle  uintptr // cublasHandle_t
	math    int32   // the handle's cublasMath_t
	start   uintptr // CUevents for Time
	stop    uintptr
	modules map[*Source]*module
	dnn     dnn             // cuDNN, when there is one
	lt      lt              // cuBLASLt, when there is one
	graphs  map[*Graph]bool // live graphs, destroyed by Close
	// capturing says the stream is recording into a graph: whatever
	// would wait for it (copies to the host, Synchronize, Time) or run
	// work at once (cuDNN's Find) is refused meanwhile.
	capturing bool
	cache     ptxCache
	allocs    allocTable
	arch      int  // compute capability NVRTC compiles for, e.g. 90
	exact     bool // arch is the device's own (CUBIN possible)
	closed    bool
}

type module struct {
	handle uintptr
	funcs  map[string]*Function
	how    string // "PTX compute_90 (cached)" and the like
}

// Open opens device 0 with the driver, NVRTC and cuBLAS, compiled PTX
// cached under os.UserCacheDir()/rulebook/ptx. Without a usable GPU or
// library the error wraps ErrUnavailable and names the library files
// tried.
func Open() (*Context, error) { return open(defaultPTXCache()) }

func open(cache ptxCache) (*Context, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, err
	}
	if len(drv.missing) > 0 {
		return nil, fmt.Errorf("%w: the NVIDIA driver library lacks %s (too old a driver?)", ErrUnavailable, strings.Join(drv.missing, ", "))
	}
	dev, device, err := drv.device0()
	if err != nil {
		return nil, err
	}
	nv, err := loadNVRTC()
	if err != nil {
		return nil, fmt.Errorf("%w (found %s)", err, dev)
	}
	blas, err := loadCUBLAS()
	if err != nil {
		return nil, fmt.Errorf("%w (found %s)", err, dev)
	}
	c := &Context{drv: drv, nvrtc: nv, blas: blas, dev: dev, device: device, cache: cache, modules: map[*Source]*module{}, graphs: map[*Graph]bool{}}
	// Without cuDNN convolutions stay im2col + cuBLAS: ConvError says why.
	c.dnn.lib, c.dnn.err = loadCUDNN()
	// Without cuBLASLt products keep separate bias and activation work:
	// EpilogueError says why.
	c.lt.lib, c.lt.err = loadCUBLASLt()
	arch, exact, ok := pickArch(10*dev.Major+dev.Minor, nv.supportedArchs())
	if !ok {
		return nil, fmt.Errorf("%w: NVRTC %s (%s) compiles for none of the architectures up to the GPU's compute %d.%d",
			ErrUnavailable, nv.version(), nv.file, dev.Major, dev.Minor)
	}
	c.arch, c.exact = arch, exact
	if err := c.init(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Context) init() error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if rc := c.drv.cuDevicePrimaryCtxRetain(&c.ctx, c.device); rc != 0 {
		return c.fail("cuDevicePrimaryCtxRetain", rc)
	}
	if rc := c.drv.cuCtxSetCurrent(c.ctx); rc != 0 {
		return c.fail("cuCtxSetCurrent", rc)
	}
	// Flags 0 (CU_STREAM_DEFAULT): the stream also orders with the legacy
	// default stream, should any library use it.
	if rc := c.drv.cuStreamCreate(&c.stream, 0); rc != 0 {
		return c.fail("cuStreamCreate", rc)
	}
	if rc := c.blas.cublasCreate(&c.handle); rc != 0 {
		return fmt.Errorf("cuda: cublasCreate_v2: %s", c.blas.describe(rc))
	}
	if rc := c.blas.cublasSetStream(c.handle, c.stream); rc != 0 {
		return fmt.Errorf("cuda: cublasSetStream_v2: %s", c.blas.describe(rc))
	}
	for _, e := range []*uintptr{&c.start, &c.stop} {
		if rc := c.drv.cuEventCreate(e, 0); rc != 0 {
			return c.fail("cuEventCreate", rc)
		}
	}
	if c.dnn.lib != nil {
		if err := c.dnn.open(c.stream); err != nil {
			c.dnn.close()
			c.dnn = dnn{err: fmt.Errorf("%w: %w", ErrUnavailable, err)}
		}
	}
	if c.lt.lib != nil {
		if err := c.lt.check("cublasLtCreate", c.lt.lib.cublasLtCreate(&c.lt.h)); err != nil {
			c.lt = lt{err: fmt.Errorf("%w: %w", ErrUnavailable, err)}
		}
	}
	return nil
}

// Describe says what the context runs on and with.
func (c *Context) Describe() string {
	conv := "no cuDNN: " + fmt.Sprint(c.dnn.err)
	if c.dnn.lib != nil {
		conv = fmt.Sprintf("cuDNN %s (%s)", c.dnn.lib.Version(), c.dnn.lib.file)
	}
	blasLt := "no cuBLASLt: " + fmt.Sprint(c.lt.err)
	if c.lt.lib != nil {
		blasLt = "cuBLASLt " + c.lt.lib.file
	}
	return fmt.Sprintf("%s; NVRTC %s (%s) compiling for compute_%d; cuBLAS %s; %s; %s", c.dev, c.nvrtc.version(), c.nvrtc.file, c.arch, c.blas.file, blasLt, conv)
}

// Device describes the GPU.
func (c *Context) Device() Device { return c.dev }

// ReductionThreads is 256: eight warps per reduction block.
func (c *Context) ReductionThreads() int { return MaxReductionThreads }

// fail turns a driver error into a Go error naming the call.
func (c *Context) fail(call string, rc int32) error {
	msg := fmt.Sprintf("cuda: %s: %s", call, c.drv.describe(rc))
	switch rc {
	case 700, 701, 702, 714, 715, 716, 717, 718, 719:
		msg += " (a kernel failed; the CUDA context cannot be used any more)"
	}
	return errors.New(msg)
}

// enter locks the mutex and the OS thread and makes the context current;
// the returned function undoes both.
func (c *Context) enter() (func(), error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("cuda: the context is closed")
	}
	goruntime.LockOSThread()
	if rc := c.drv.cuCtxSetCurrent(c.ctx); rc != 0 {
		goruntime.UnlockOSThread()
		c.mu.Unlock()
		return nil, c.fail("cuCtxSetCurrent", rc)
	}
	return func() {
		goruntime.UnlockOSThread()
		c.mu.Unlock()
	}, nil
}

// Alloc allocates device memory.
func (c *Context) Alloc(bytes int) (Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: Alloc(%d)", bytes)
	}
	leave, err := c.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	var p uintptr
	if rc := c.drv.cuMemAlloc(&p, uintptr(bytes)); rc != 0 {
		return 0, fmt.Errorf("%w (allocating %d bytes)", c.fail("cuMemAlloc_v2", rc), bytes)
	}
	c.allocs.add(Ptr(p), bytes)
	return Ptr(p), nil
}

// Free releases memory from Alloc.
func (c *Context) Free(p Ptr) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if _, ok := c.allocs.remove(p); !ok {
		return fmt.Errorf("cuda: Free(%#x): not an allocation", uint64(p))
	}
	if rc := c.drv.cuMemFree(uintptr(p)); rc != 0 {
		return c.fail("cuMemFree_v2", rc)
	}
	return nil
}

// HostToDevice queues a copy from pageable host memory, which the driver
// stages before returning, so src may be reused at once.
func (c *Context) HostToDevice(dst Ptr, src unsafe.Pointer, bytes int) error {
	if bytes == 0 {
		return nil
	}
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := c.notCapturing("HostToDevice"); err != nil {
		return err
	}
	if !c.allocs.contains(dst, bytes) {
		return fmt.Errorf("cuda: HostToDevice: %d bytes at %#x are not inside one allocation", bytes, uint64(dst))
	}
	if rc := c.drv.cuMemcpyHtoDAsync(uintptr(dst), src, uintptr(bytes), c.stream); rc != 0 {
		return c.fail("cuMemcpyHtoDAsync_v2", rc)
	}
	return nil
}

// DeviceToHost copies to host memory once the work queued before it is
// done, and waits for the copy.
func (c *Context) DeviceToHost(dst unsafe.Pointer, src Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := c.notCapturing("DeviceToHost"); err != nil {
		return err
	}
	if !c.allocs.contains(src, bytes) {
		return fmt.Errorf("cuda: DeviceToHost: %d bytes at %#x are not inside one allocation", bytes, uint64(src))
	}
	if rc := c.drv.cuMemcpyDtoHAsync(dst, uintptr(src), uintptr(bytes), c.stream); rc != 0 {
		return c.fail("cuMemcpyDtoHAsync_v2", rc)
	}
	if rc := c.drv.cuStreamSynchronize(c.stream); rc != 0 {
		return c.fail("cuStreamSynchronize", rc)
	}
	return nil
}

// DeviceToDevice queues a copy between allocations.
func (c *Context) DeviceToDevice(dst, src Ptr, bytes int) error {
	if bytes == 0 {
		return nil
	}
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if !c.allocs.contains(dst, bytes) || !c.allocs.contains(src, bytes) {
		return fmt.Errorf("cuda: DeviceToDevice: %d bytes from %#x to %#x are not inside allocations", bytes, uint64(src), uint64(dst))
	}
	if rc := c.drv.cuMemcpyDtoDAsync(uintptr(dst), uintptr(src), uintptr(bytes), c.stream); rc != 0 {
		return c.fail("cuMemcpyDtoDAsync_v2", rc)
	}
	return nil
}

// Function returns a kernel, compiling and loading its source first if
// needed.
func (c *Context) Function(src *Source, name string) (*Function, error) {
	decl, err := src.Kernel(name)
	if err != nil {
		return nil, err
	}
	leave, err := c.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	m := c.modules[src]
	if m == nil {
		if m, err = c.loadModule(src); err != nil {
			return nil, err
		}
		c.modules[src] = m
	}
	if f := m.funcs[name]; f != nil {
		return f, nil
	}
	var h uintptr
	if rc := c.drv.cuModuleGetFunction(&h, m.handle, name); rc != 0 {
		return nil, fmt.Errorf("%w (kernel %s of source %s, loaded from %s)", c.fail("cuModuleGetFunction", rc), name, src.Name, m.how)
	}
	f := &Function{Name: name, Source: src, Params: decl.Params, Syncs: decl.Syncs, handle: h}
	m.funcs[name] = f
	return f, nil
}

// loadModule compiles a source to PTX for c.arch (or takes the cached
// PTX) and loads it. When the driver rejects the PTX (NVRTC newer than
// the driver: CUDA_ERROR_UNSUPPORTED_PTX_VERSION) it compiles a CUBIN for
// the device's exact architecture instead, which needs no PTX JIT.
func (c *Context) loadModule(src *Source) (*module, error) {
	ptxOpts := []string{fmt.Sprintf("--gpu-architecture=compute_%d", c.arch)}
	m, ptxErr := c.loadImage(src, ptxOpts, "ptx")
	if ptxErr == nil {
		return m, nil
	}
	if !c.exact || c.nvrtc.nvrtcGetCUBIN == nil {
		return nil, ptxErr
	}
	cubinOpts := []string{fmt.Sprintf("--gpu-architecture=sm_%d", c.arch)}
	m, cubinErr := c.loadImage(src, cubinOpts, "cubin")
	if cubinErr != nil {
		return nil, fmt.Errorf("%w; then as CUBIN: %w", ptxErr, cubinErr)
	}
	return m, nil
}

// loadImage compiles (or reads from the cache) and loads one image kind.
// A cached image the driver rejects is dropped and compiled afresh once.
func (c *Context) loadImage(src *Source, opts []string, kind string) (*module, error) {
	key := cacheKey(src.Code, opts, c.nvrtc.version(), kind)
	for attempt := 0; attempt < 2; attempt++ {
		image, how := c.cache.load(key, kind), "cached"
		if image == nil || attempt > 0 {
			out, err := c.nvrtc.compile(src.Code, src.Name+".cu", opts, kind == "cubin")
			if err != nil {
				return nil, err
			}
			image, how = out.image, "compiled"
			if err := c.cache.store(key, kind, image); err != nil {
				how += ", not cached: " + err.Error()
			}
		}
		if kind == "ptx" && image[len(image)-1] != 0 {
			image = append(image, 0)
		}
		var h uintptr
		rc := c.drv.cuModuleLoadData(&h, unsafe.Pointer(&image[0]))
		goruntime.KeepAlive(image)
		desc := fmt.Sprintf("%s %s (%s, NVRTC %s)", strings.ToUpper(kind), strings.TrimPrefix(opts[0], "--gpu-architecture="), how, c.nvrtc.version())
		if rc == 0 {
			return &module{handle: h, funcs: map[string]*Function{}, how: desc}, nil
		}
		err := fmt.Errorf("%w (source %s as %s; driver %d.%d)", c.fail("cuModuleLoadData", rc), src.Name, desc,
			c.dev.DriverVersion/1000, c.dev.DriverVersion%1000/10)
		if how != "cached" {
			return nil, err
		}
		c.cache.drop(key, kind)
	}
	return nil, errors.New("cuda: unreachable")
}

// Launch queues a kernel on the stream, without dynamic shared memory.
func (c *Context) Launch(f *Function, grid, block Dim3, args *Args) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := f.check(grid, block, args, &c.allocs); err != nil {
		return err
	}
	rc := c.drv.cuLaunchKernel(f.handle, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, 0, c.stream, args.pointer(), nil)
	goruntime.KeepAlive(args)
	if rc != 0 {
		return fmt.Errorf("%w (kernel %s, grid %v, block %v)", c.fail("cuLaunchKernel", rc), f.Name, grid, block)
	}
	return nil
}

// Gemm queues cublasSgemm_v2, or cublasSgemmStridedBatched for a batch.
func (c *Context) Gemm(g *Gemm) error {
	if g.M == 0 || g.N == 0 {
		return nil
	}
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := g.check(&c.allocs); err != nil {
		return err
	}
	op := func(t bool) int32 {
		if t {
			return cublasOpT
		}
		return cublasOpN
	}
	alpha, beta := g.Alpha, g.Beta
	if g.Precision == BF16 {
		return c.gemmBF16(g, op(g.TransA), op(g.TransB))
	}
	if err := c.setMath(g.Precision); err != nil {
		return err
	}
	var rc int32
	call := "cublasSgemm_v2"
	if g.Batch == 1 {
		rc = c.blas.cublasSgemm(c.handle, op(g.TransA), op(g.TransB), int32(g.M), int32(g.N), int32(g.K),
			&alpha, uintptr(g.A), int32(g.LDA), uintptr(g.B), int32(g.LDB), &beta, uintptr(g.C), int32(g.LDC))
	} else {
		call = "cublasSgemmStridedBatched"
		rc = c.blas.cublasSgemmStridedBatched(c.handle, op(g.TransA), op(g.TransB), int32(g.M), int32(g.N), int32(g.K),
			&alpha, uintptr(g.A), int32(g.LDA), int64(g.StrideA), uintptr(g.B), int32(g.LDB), int64(g.StrideB),
			&beta, uintptr(g.C), int32(g.LDC), int64(g.StrideC), int32(g.Batch))
	}
	if rc != 0 {
		return fmt.Errorf("cuda: %s(m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d): %s", call, g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, g.Batch, c.blas.describe(rc))
	}
	return nil
}

// Synchronize waits for the stream.
func (c *Context) Synchronize() error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := c.notCapturing("Synchronize"); err != nil {
		return err
	}
	if rc := c.drv.cuStreamSynchronize(c.stream); rc != 0 {
		return c.fail("cuStreamSynchronize", rc)
	}
	return nil
}

// Time measures the device time of the work fn queues with a pair of
// events around it.
func (c *Context) Time(fn func() error) (time.Duration, error) {
	record := func(e uintptr) error {
		leave, err := c.enter()
		if err != nil {
			return err
		}
		defer leave()
		if err := c.notCapturing("Time"); err != nil {
			return err
		}
		if rc := c.drv.cuEventRecord(e, c.stream); rc != 0 {
			return c.fail("cuEventRecord", rc)
		}
		return nil
	}
	if err := record(c.start); err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	if err := record(c.stop); err != nil {
		return 0, err
	}
	leave, err := c.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	if rc := c.drv.cuEventSynchronize(c.stop); rc != 0 {
		return 0, c.fail("cuEventSynchronize", rc)
	}
	var ms float32
	if rc := c.drv.cuEventElapsedTime(&ms, c.start, c.stop); rc != 0 {
		return 0, c.fail("cuEventElapsedTime", rc)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close frees what the context allocated and releases the primary
// context. It may be called more than once.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.drv == nil {
		return nil
	}
	c.closed = true
	if c.ctx == 0 {
		return nil
	}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var errs []error
	check := func(call string, rc int32) {
		if rc != 0 {
			errs = append(errs, c.fail(call, rc))
		}
	}
	check("cuCtxSetCurrent", c.drv.cuCtxSetCurrent(c.ctx))
	if c.stream != 0 {
		check("cuStreamSynchronize", c.drv.cuStreamSynchronize(c.stream))
	}
	for _, p := range c.allocs.all() {
		c.allocs.remove(p)
		check("cuMemFree_v2", c.drv.cuMemFree(uintptr(p)))
	}
	for _, m := range c.modules {
		check("cuModuleUnload", c.drv.cuModuleUnload(m.handle))
	}
	c.modules = nil
	errs = append(errs, c.closeGraphs()...)
	errs = append(errs, c.dnn.close()...)
	errs = append(errs, c.lt.close()...)
	if c.handle != 0 {
		if rc := c.blas.cublasDestroy(c.handle); rc != 0 {
			errs = append(errs, fmt.Errorf("cuda: cublasDestroy_v2: %s", c.blas.describe(rc)))
		}
	}
	for _, e := range []uintptr{c.start, c.stop} {
		if e != 0 {
			check("cuEventDestroy_v2", c.drv.cuEventDestroy(e))
		}
	}
	if c.stream != 0 {
		check("cuStreamDestroy_v2", c.drv.cuStreamDestroy(c.stream))
	}
	check("cuCtxSetCurrent", c.drv.cuCtxSetCurrent(0))
	check("cuDevicePrimaryCtxRelease_v2", c.drv.cuDevicePrimaryCtxRelease(c.device))
	return errors.Join(errs...)
}

var _ Backend = (*Context)(nil)
