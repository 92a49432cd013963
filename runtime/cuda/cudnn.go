package cuda

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// cuDNN is optional: without it (or with a version other than 9)
// convolutions stay im2col + cuBLAS, and Context.ConvError says why. It
// is looked for like cuBLAS, by name, then in the toolkit and wheel
// directories (pip's nvidia-cudnn-cu12 puts it in nvidia/cudnn/lib) and
// Debian's multiarch directories (libcudnn9-cuda-12). cuDNN 9's
// libcudnn.so.9 is a shim that loads libcudnn_cnn, libcudnn_ops and the
// rest by name when first needed, so those are loaded from its
// directory first. We call only the legacy (v7-style) descriptor API,
// which cuDNN 9 still ships in libcudnn_cnn.
var (
	cudnnLibraries = []string{"libcudnn.so.9", "libcudnn.so", "libcudnn.so.8"}
	cudnnDirs      = []string{"/usr/lib/*-linux-gnu", "/usr/lib64"}
)

// cudnnMajor is the cuDNN major version the bindings are written for.
const cudnnMajor = 9

// cuDNN constants (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h).
const (
	cudnnTensorNCHW       = 0 // cudnnTensorFormat_t
	cudnnDataFloat        = 0 // cudnnDataType_t
	cudnnCrossCorrelation = 1 // cudnnConvolutionMode_t
	cudnnTensorOpMath     = 1 // cudnnMathType_t
	cudnnTensorOpMathConv = 2 // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
	cudnnFMAMath          = 3
	cudnnActivationRelu   = 1 // cudnnActivationMode_t
	cudnnNotPropagateNaN  = 0 // cudnnNanPropagation_t
	// cudnnStatusNotSupported is CUDNN_STATUS_NOT_SUPPORTED.
	cudnnStatusNotSupported = 3000
)

// cudnnLib holds the cuDNN entry points. Handles and descriptors are
// pointers, cudnnStatus_t and the other enums C ints, size_t uintptr;
// alpha and beta point to host floats (float32 data takes float
// scaling factors).
type cudnnLib struct {
	cudnnGetVersion     func() uintptr
	cudnnGetErrorString func(rc int32) string
	cudnnCreate         func(h *uintptr) int32
	cudnnDestroy        func(h uintptr) int32
	cudnnSetStream      func(h, s uintptr) int32

	cudnnCreateTensorDescriptor       func(d *uintptr) int32
	cudnnSetTensor4dDescriptor        func(d uintptr, format, dtype, n, c, h, w int32) int32
	cudnnDestroyTensorDescriptor      func(d uintptr) int32
	cudnnCreateFilterDescriptor       func(d *uintptr) int32
	cudnnSetFilter4dDescriptor        func(d uintptr, dtype, format, k, c, h, w int32) int32
	cudnnDestroyFilterDescriptor      func(d uintptr) int32
	cudnnCreateConvolutionDescriptor  func(d *uintptr) int32
	cudnnSetConvolution2dDescriptor   func(d uintptr, padH, padW, strideH, strideW, dilH, dilW, mode, computeType int32) int32
	cudnnSetConvolutionGroupCount     func(d uintptr, groups int32) int32
	cudnnSetConvolutionMathType       func(d uintptr, math int32) int32
	cudnnDestroyConvolutionDescriptor func(d uintptr) int32
	cudnnCreateActivationDescriptor   func(d *uintptr) int32
	cudnnSetActivationDescriptor      func(d uintptr, mode, nan int32, coef float64) int32
	cudnnDestroyActivationDescriptor  func(d uintptr) int32

	cudnnGetConvolution2dForwardOutputDim       func(conv, x, w uintptr, n, c, h, wd *int32) int32
	cudnnGetConvolutionForwardAlgorithmMaxCount func(h uintptr, n *int32) int32
	cudnnFindConvolutionForwardAlgorithm        func(h, x, w, conv, y uintptr, requested int32, returned *int32, perf *convPerf) int32
	cudnnConvolutionForward                     func(h uintptr, alpha *float32, xd, x, wd, w, conv uintptr, algo int32,
		ws, wsBytes uintptr, beta *float32, yd, y uintptr) int32
	cudnnConvolutionBiasActivationForward func(h uintptr, alpha1 *float32, xd, x, wd, w, conv uintptr, algo int32,
		ws, wsBytes uintptr, alpha2 *float32, zd, z, bd, b, act, yd, y uintptr) int32
	cudnnAddTensor         func(h uintptr, alpha *float32, ad, a uintptr, beta *float32, cd, c uintptr) int32
	cudnnActivationForward func(h, act uintptr, alpha *float32, xd, x uintptr, beta *float32, yd, y uintptr) int32

	file    string
	version int // cudnnGetVersion(): 90100 for 9.1.0
}

// convPerf is cudnnConvolutionFwdAlgoPerf_t: algo and status (ints), the
// time in ms (float), the workspace (size_t, after 4 bytes of padding),
// determinism and math type (ints) and three reserved ints. Find sorts
// the results by time, so only their order is read.
type convPerf struct {
	algo, status int32
	_            float32 // time
	_            int32
	memory       uint64
	_            [2]int32 // determinism, math type
	_            [3]int32
	_            int32 // the struct's 8-byte alignment
}

// versionString renders cudnnGetVersion's number: major·10000 +
// minor·100 + patch from cuDNN 9 on, major·1000 + minor·100 + patch
// before.
func cudnnVersionString(v int) (string, int) {
	if v >= 90000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100), v / 10000
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100), v / 1000
}

// loadCUDNN loads the first cuDNN 9 of the candidates. A library of
// another major version is passed over; if no cuDNN 9 turns up, the
// error says what was found.
func loadCUDNN() (*cudnnLib, error) {
	names := libraryCandidates(cudnnLibraries, "libcudnn.so", slices.Concat(searchDirs(), cudnnDirs), filepath.Glob)
	var tried, wrong []string
	for _, name := range names {
		lib, t, err := openWithSiblings([]string{name}, "libcudnn_")
		tried = append(tried, t...)
		if err != nil {
			continue
		}
		d := &cudnnLib{file: name}
		if !registerOptional(lib, "cudnnGetVersion", &d.cudnnGetVersion) {
			wrong = append(wrong, name+" without cudnnGetVersion")
			continue
		}
		d.version = int(d.cudnnGetVersion())
		if v, major := cudnnVersionString(d.version); major != cudnnMajor {
			wrong = append(wrong, fmt.Sprintf("cuDNN %s in %s", v, name))
			continue
		}
		return d, d.bind(lib)
	}
	if len(wrong) > 0 {
		return nil, fmt.Errorf("%w: found %s, need cuDNN %d", ErrUnavailable, strings.Join(wrong, ", "), cudnnMajor)
	}
	return nil, fmt.Errorf("%w: no cuDNN library (tried %s); install cuDNN 9 (pip's nvidia-cudnn-cu12, or libcudnn9-cuda-12) or add its directory to LD_LIBRARY_PATH",
		ErrUnavailable, strings.Join(tried, ", "))
}

func (d *cudnnLib) bind(lib uintptr) error {
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"cudnnGetErrorString", &d.cudnnGetErrorString},
		{"cudnnCreate", &d.cudnnCreate},
		{"cudnnDestroy", &d.cudnnDestroy},
		{"cudnnSetStream", &d.cudnnSetStream},
		{"cudnnCreateTensorDescriptor", &d.cudnnCreateTensorDescriptor},
		{"cudnnSetTensor4dDescriptor", &d.cudnnSetTensor4dDescriptor},
		{"cudnnDestroyTensorDescriptor", &d.cudnnDestroyTensorDescriptor},
		{"cudnnCreateFilterDescriptor", &d.cudnnCreateFilterDescriptor},
		{"cudnnSetFilter4dDescriptor", &d.cudnnSetFilter4dDescriptor},
		{"cudnnDestroyFilterDescriptor", &d.cudnnDestroyFilterDescriptor},
		{"cudnnCreateConvolutionDescriptor", &d.cudnnCreateConvolutionDescriptor},
		{"cudnnSetConvolution2dDescriptor", &d.cudnnSetConvolution2dDescriptor},
		{"cudnnSetConvolutionGroupCount", &d.cudnnSetConvolutionGroupCount},
		{"cudnnSetConvolutionMathType", &d.cudnnSetConvolutionMathType},
		{"cudnnDestroyConvolutionDescriptor", &d.cudnnDestroyConvolutionDescriptor},
		{"cudnnCreateActivationDescriptor", &d.cudnnCreateActivationDescriptor},
		{"cudnnSetActivationDescriptor", &d.cudnnSetActivationDescriptor},
		{"cudnnDestroyActivationDescriptor", &d.cudnnDestroyActivationDescriptor},
		{"cudnnGetConvolution2dForwardOutputDim", &d.cudnnGetConvolution2dForwardOutputDim},
		{"cudnnGetConvolutionForwardAlgorithmMaxCount", &d.cudnnGetConvolutionForwardAlgorithmMaxCount},
		{"cudnnFindConvolutionForwardAlgorithm", &d.cudnnFindConvolutionForwardAlgorithm},
		{"cudnnConvolutionForward", &d.cudnnConvolutionForward},
		{"cudnnConvolutionBiasActivationForward", &d.cudnnConvolutionBiasActivationForward},
		{"cudnnAddTensor", &d.cudnnAddTensor},
		{"cudnnActivationForward", &d.cudnnActivationForward},
	} {
		if err := register(lib, d.file, s.name, s.fn); err != nil {
			return err
		}
	}
	return nil
}

// describe renders a cudnnStatus_t, e.g. "CUDNN_STATUS_BAD_PARAM (2000)".
func (d *cudnnLib) describe(rc int32) string {
	return fmt.Sprintf("%s (%d)", d.cudnnGetErrorString(rc), rc)
}

// Version renders the library's version, e.g. "9.1.0".
func (d *cudnnLib) Version() string {
	v, _ := cudnnVersionString(d.version)
	return v
}

// dnn is a Context's cuDNN state: the handle on the context's stream,
// the ReLU descriptor, and per convolution shape its descriptors and
// chosen algorithm.
type dnn struct {
	lib   *cudnnLib
	err   error // why there is no cuDNN (lib is nil then)
	h     uintptr
	relu  uintptr
	plans map[shapeKey]*convPlan
	// ws is the workspace every convolution shares, wsBytes its size. A
	// larger one replaces it without freeing it (Close does): a captured
	// graph may still read the old one.
	ws      Ptr
	wsBytes int
}

// convPlan is one convolution shape prepared for cuDNN.
type convPlan struct {
	x, w, y, bias, conv uintptr // descriptors
	algo                int32
	wsBytes             int
	// unfused is set once the fused bias + ReLU call answered
	// CUDNN_STATUS_NOT_SUPPORTED for this shape.
	unfused bool
}

func (d *dnn) check(call string, rc int32) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("cuda: %s: %s", call, d.lib.describe(rc))
}

// open creates the handle and the ReLU descriptor on the stream.
func (d *dnn) open(stream uintptr) error {
	if err := d.check("cudnnCreate", d.lib.cudnnCreate(&d.h)); err != nil {
		return err
	}
	if err := d.check("cudnnSetStream", d.lib.cudnnSetStream(d.h, stream)); err != nil {
		return err
	}
	if err := d.check("cudnnCreateActivationDescriptor", d.lib.cudnnCreateActivationDescriptor(&d.relu)); err != nil {
		return err
	}
	return d.check("cudnnSetActivationDescriptor", d.lib.cudnnSetActivationDescriptor(d.relu, cudnnActivationRelu, cudnnNotPropagateNaN, 0))
}

// describePlan sets up the descriptors of c's shape and checks that
// cuDNN computes the output size c has.
func (d *dnn) describePlan(c *Convolution) (*convPlan, error) {
	p := &convPlan{}
	l := d.lib
	i32 := func(v int) int32 { return int32(v) }
	steps := []struct {
		call string
		rc   func() int32
	}{
		{"cudnnCreateTensorDescriptor", func() int32 { return l.cudnnCreateTensorDescriptor(&p.x) }},
		{"cudnnCreateTensorDescriptor", func() int32 { return l.cudnnCreateTensorDescriptor(&p.y) }},
		{"cudnnCreateTensorDescriptor", func() int32 { return l.cudnnCreateTensorDescriptor(&p.bias) }},
		{"cudnnCreateFilterDescriptor", func() int32 { return l.cudnnCreateFilterDescriptor(&p.w) }},
		{"cudnnCreateConvolutionDescriptor", func() int32 { return l.cudnnCreateConvolutionDescriptor(&p.conv) }},
		{"cudnnSetTensor4dDescriptor(x)", func() int32 {
			return l.cudnnSetTensor4dDescriptor(p.x, cudnnTensorNCHW, cudnnDataFloat, i32(c.Batch), i32(c.Channels), i32(c.Height), i32(c.Width))
		}},
		{"cudnnSetTensor4dDescriptor(y)", func() int32 {
			return l.cudnnSetTensor4dDescriptor(p.y, cudnnTensorNCHW, cudnnDataFloat, i32(c.Batch), i32(c.Filters), i32(c.OutH), i32(c.OutW))
		}},
		{"cudnnSetTensor4dDescriptor(bias)", func() int32 {
			return l.cudnnSetTensor4dDescriptor(p.bias, cudnnTensorNCHW, cudnnDataFloat, 1, i32(c.Filters), 1, 1)
		}},
		{"cudnnSetFilter4dDescriptor", func() int32 {
			return l.cudnnSetFilter4dDescriptor(p.w, cudnnDataFloat, cudnnTensorNCHW, i32(c.Filters), i32(c.Channels/c.Groups), i32(c.KernelH), i32(c.KernelW))
		}},
		{"cudnnSetConvolution2dDescriptor", func() int32 {
			return l.cudnnSetConvolution2dDescriptor(p.conv, i32(c.PadH), i32(c.PadW), i32(c.StrideH), i32(c.StrideW),
				i32(c.DilationH), i32(c.DilationW), cudnnCrossCorrelation, cudnnDataFloat)
		}},
		{"cudnnSetConvolutionGroupCount", func() int32 { return l.cudnnSetConvolutionGroupCount(p.conv, i32(c.Groups)) }},
		{"cudnnSetConvolutionMathType", func() int32 { return l.cudnnSetConvolutionMathType(p.conv, cudnnMath(c.Precision)) }},
	}
	for _, s := range steps {
		if err := d.check(s.call, s.rc()); err != nil {
			d.destroy(p)
			return nil, fmt.Errorf("%w (%s)", err, c)
		}
	}
	var n, k, h, w int32
	if err := d.check("cudnnGetConvolution2dForwardOutputDim", l.cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &k, &h, &w)); err != nil {
		d.destroy(p)
		return nil, fmt.Errorf("%w (%s)", err, c)
	}
	if int(n) != c.Batch || int(k) != c.Filters || int(h) != c.OutH || int(w) != c.OutW {
		d.destroy(p)
		return nil, fmt.Errorf("cuda: cuDNN gives a %d×%d×%d×%d output for %s", n, k, h, w, c)
	}
	return p, nil
}

// cudnnMath is the math type of a precision. FP32 needs CUDNN_FMA_MATH:
// the default math lets cuDNN use TF32 tensor cores for float32 data.
func cudnnMath(p Precision) int32 {
	switch p {
	case TF32:
		return cudnnTensorOpMath
	case BF16:
		return cudnnTensorOpMathConv
	}
	return cudnnFMAMath
}

// destroy releases a plan's descriptors (those created).
func (d *dnn) destroy(p *convPlan) {
	for _, t := range []uintptr{p.x, p.y, p.bias} {
		if t != 0 {
			d.lib.cudnnDestroyTensorDescriptor(t)
		}
	}
	if p.w != 0 {
		d.lib.cudnnDestroyFilterDescriptor(p.w)
	}
	if p.conv != 0 {
		d.lib.cudnnDestroyConvolutionDescriptor(p.conv)
	}
}

// find asks cuDNN to time its algorithms on c's shape (it allocates its
// own buffers for that) and returns them fastest first, those that
// failed left out.
func (d *dnn) find(p *convPlan, c *Convolution) ([]convPerf, error) {
	var count int32
	if err := d.check("cudnnGetConvolutionForwardAlgorithmMaxCount", d.lib.cudnnGetConvolutionForwardAlgorithmMaxCount(d.h, &count)); err != nil {
		return nil, err
	}
	if count < 1 || count > 64 {
		count = 16
	}
	perf := make([]convPerf, count)
	var returned int32
	rc := d.lib.cudnnFindConvolutionForwardAlgorithm(d.h, p.x, p.w, p.conv, p.y, count, &returned, &perf[0])
	if err := d.check("cudnnFindConvolutionForwardAlgorithm", rc); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, c)
	}
	var ok []convPerf
	for _, r := range perf[:min(max(returned, 0), count)] {
		if r.status == 0 {
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("cuda: cudnnFindConvolutionForwardAlgorithm: no algorithm runs %s", c)
	}
	return ok, nil
}

// ConvError is nil when cuDNN is loaded, else why it is not.
func (c *Context) ConvError() error { return c.dnn.err }

// PrepareConv finds the fastest algorithm for cv's shape whose
// workspace can be allocated, once per shape.
func (c *Context) PrepareConv(cv *Convolution) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	_, err = c.convPlan(cv)
	return err
}

// convPlan returns cv's plan, making it unless capturing: cuDNN's Find
// runs convolutions and allocates, which a capture must not record.
func (c *Context) convPlan(cv *Convolution) (*convPlan, error) {
	d := &c.dnn
	if d.lib == nil {
		return nil, d.err
	}
	if err := cv.checkShape(); err != nil {
		return nil, err
	}
	key := cv.key()
	if p := d.plans[key]; p != nil {
		return p, nil
	}
	if c.capturing {
		return nil, fmt.Errorf("cuda: %s was not prepared before the capture began (cuDNN's Find cannot be captured)", cv)
	}
	p, err := d.describePlan(cv)
	if err != nil {
		return nil, err
	}
	perf, err := d.find(p, cv)
	if err != nil {
		d.destroy(p)
		return nil, err
	}
	var allocErrs []error
	for _, r := range perf {
		if err := c.growWorkspace(int(r.memory)); err != nil {
			allocErrs = append(allocErrs, fmt.Errorf("algorithm %d: %w", r.algo, err))
			continue
		}
		p.algo, p.wsBytes = r.algo, int(r.memory)
		if d.plans == nil {
			d.plans = map[shapeKey]*convPlan{}
		}
		d.plans[key] = p
		return p, nil
	}
	d.destroy(p)
	return nil, fmt.Errorf("cuda: no cuDNN workspace for %s: %w", cv, errors.Join(allocErrs...))
}

// growWorkspace makes the shared workspace at least bytes long.
func (c *Context) growWorkspace(bytes int) error {
	d := &c.dnn
	if bytes <= d.wsBytes {
		return nil
	}
	var p uintptr
	if rc := c.drv.cuMemAlloc(&p, uintptr(bytes)); rc != 0 {
		return fmt.Errorf("%w (a workspace of %d bytes)", c.fail("cuMemAlloc_v2", rc), bytes)
	}
	c.allocs.add(Ptr(p), bytes)
	d.ws, d.wsBytes = Ptr(p), bytes
	return nil
}

// Conv queues cuDNN's convolution: cudnnConvolutionBiasActivationForward
// for a bias and a ReLU together, else cudnnConvolutionForward followed
// by cudnnAddTensor for a bias and cudnnActivationForward for a ReLU.
func (c *Context) Conv(cv *Convolution) error {
	leave, err := c.enter()
	if err != nil {
		return err
	}
	defer leave()
	p, err := c.convPlan(cv)
	if err != nil {
		return err
	}
	if err := cv.check(&c.allocs); err != nil {
		return err
	}
	d, l := &c.dnn, c.dnn.lib
	one, zero := float32(1), float32(0)
	ws, wsBytes := uintptr(d.ws), uintptr(p.wsBytes)
	x, w, y, b := uintptr(cv.X), uintptr(cv.Filter), uintptr(cv.Y), uintptr(cv.Bias)
	if cv.Bias != 0 && cv.Relu && !p.unfused {
		// alpha2 = 0: z (given as y) does not contribute. A shape the
		// fused kernels do not take (it fails before queueing anything)
		// takes the three calls below from then on.
		rc := l.cudnnConvolutionBiasActivationForward(d.h, &one, p.x, x, p.w, w, p.conv, p.algo, ws, wsBytes,
			&zero, p.y, y, p.bias, b, d.relu, p.y, y)
		if rc != cudnnStatusNotSupported {
			return wrapConv(d.check("cudnnConvolutionBiasActivationForward", rc), cv)
		}
		p.unfused = true
	}
	rc := l.cudnnConvolutionForward(d.h, &one, p.x, x, p.w, w, p.conv, p.algo, ws, wsBytes, &zero, p.y, y)
	if err := d.check("cudnnConvolutionForward", rc); err != nil {
		return wrapConv(err, cv)
	}
	if cv.Bias != 0 {
		if err := d.check("cudnnAddTensor", l.cudnnAddTensor(d.h, &one, p.bias, b, &one, p.y, y)); err != nil {
			return wrapConv(err, cv)
		}
	}
	if cv.Relu {
		rc := l.cudnnActivationForward(d.h, d.relu, &one, p.y, y, &zero, p.y, y)
		return wrapConv(d.check("cudnnActivationForward", rc), cv)
	}
	return nil
}

func wrapConv(err error, cv *Convolution) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w (%s)", err, cv)
}

// close releases the plans, the ReLU descriptor and the handle.
func (d *dnn) close() []error {
	if d.lib == nil {
		return nil
	}
	for _, p := range d.plans {
		d.destroy(p)
	}
	d.plans = nil
	var errs []error
	if d.relu != 0 {
		errs = append(errs, d.check("cudnnDestroyActivationDescriptor", d.lib.cudnnDestroyActivationDescriptor(d.relu)))
	}
	if d.h != 0 {
		errs = append(errs, d.check("cudnnDestroy", d.lib.cudnnDestroy(d.h)))
	}
	return errs
}
