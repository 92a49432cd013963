package cuda

import (
	"fmt"
	"strings"
)

// The kernels of the runtime's CUDA executor: CUDA C, one Source per
// operator family, compiled by NVRTC at first use. Tensors are float32
// and row-major; element counts and offsets are long long. 1-D kernels
// walk their elements with a grid-stride loop, so any grid size covers
// any count; the reduction kernels (those with __shared__ arrays) run one
// block per output line with a power-of-two block of at most RB_THREADS
// threads, and every thread of such a block reaches every __syncthreads.
//
// Go and C share the operation codes through the enums the prelude
// declares, generated from the constants below.

// Kernel names.
const (
	KernelUnary      = "rb_unary"
	KernelClip       = "rb_clip"
	KernelBinary     = "rb_binary"
	KernelFill       = "rb_fill"
	KernelBatchNorm  = "rb_batchnorm"
	KernelIm2col     = "rb_im2col"
	KernelPool       = "rb_pool"
	KernelGlobalPool = "rb_global_pool"
	KernelTranspose  = "rb_transpose"
	KernelConcat     = "rb_concat"
	KernelSplit      = "rb_split"
	KernelPad        = "rb_pad"
	KernelSoftmax    = "rb_softmax"
	KernelReduce     = "rb_reduce"
	KernelLayerNorm  = "rb_layernorm"
	KernelGelu       = "rb_gelu"
	KernelGather     = "rb_gather"
)

// Unary operations of rb_unary (alpha and beta are the operators'
// attributes).
const (
	UnaryRelu = iota
	UnarySqrt
	UnaryErf
	UnaryAbs
	UnaryNeg
	UnaryExp
	UnaryLog
	UnarySigmoid
	UnaryTanh
	UnaryReciprocal
	UnaryFloor
	UnaryCeil
	UnaryRound
	UnarySign
	UnarySoftplus
	UnarySoftsign
	UnarySin
	UnaryCos
	UnaryTan
	UnaryAsin
	UnaryAcos
	UnaryAtan
	UnarySinh
	UnaryCosh
	UnaryAsinh
	UnaryAcosh
	UnaryAtanh
	UnaryHardSwish
	UnaryLeakyRelu       // alpha
	UnaryElu             // alpha
	UnaryCelu            // alpha
	UnarySelu            // alpha, gamma as beta
	UnaryThresholdedRelu // alpha
	UnaryHardSigmoid     // alpha, beta
	UnaryScale           // alpha·x
	UnaryGeluTanh        // Gelu's tanh approximation
)

// Binary operations of rb_binary.
const (
	BinaryAdd = iota
	BinarySub
	BinaryMul
	BinaryDiv
	BinaryPow
	BinaryMax
	BinaryMin
	BinaryPRelu // a where a ≥ 0, else a·b
	BinaryFirst // a: a broadcast copy
)

// Reductions of rb_reduce.
const (
	ReduceMean = iota
	ReduceSum
	ReduceMax
	ReduceMin
	ReduceProd
	ReduceL1
	ReduceL2
	ReduceLogSum
	ReduceLogSumExp
	ReduceSumSquare
)

// Pooling kinds of rb_pool and rb_global_pool.
const (
	PoolMax = iota
	PoolAverage
)

// Padding modes of rb_pad.
const (
	PadConstant = iota
	PadReflect
	PadEdge
)

type cConst struct {
	name  string
	value int
}

// sharedConstants are the codes above as the C sources name them.
var sharedConstants = []cConst{
	{"RB_UNARY_RELU", UnaryRelu}, {"RB_UNARY_SQRT", UnarySqrt}, {"RB_UNARY_ERF", UnaryErf},
	{"RB_UNARY_ABS", UnaryAbs}, {"RB_UNARY_NEG", UnaryNeg}, {"RB_UNARY_EXP", UnaryExp},
	{"RB_UNARY_LOG", UnaryLog}, {"RB_UNARY_SIGMOID", UnarySigmoid}, {"RB_UNARY_TANH", UnaryTanh},
	{"RB_UNARY_RECIPROCAL", UnaryReciprocal}, {"RB_UNARY_FLOOR", UnaryFloor}, {"RB_UNARY_CEIL", UnaryCeil},
	{"RB_UNARY_ROUND", UnaryRound}, {"RB_UNARY_SIGN", UnarySign}, {"RB_UNARY_SOFTPLUS", UnarySoftplus},
	{"RB_UNARY_SOFTSIGN", UnarySoftsign}, {"RB_UNARY_SIN", UnarySin}, {"RB_UNARY_COS", UnaryCos},
	{"RB_UNARY_TAN", UnaryTan}, {"RB_UNARY_ASIN", UnaryAsin}, {"RB_UNARY_ACOS", UnaryAcos},
	{"RB_UNARY_ATAN", UnaryAtan}, {"RB_UNARY_SINH", UnarySinh}, {"RB_UNARY_COSH", UnaryCosh},
	{"RB_UNARY_ASINH", UnaryAsinh}, {"RB_UNARY_ACOSH", UnaryAcosh}, {"RB_UNARY_ATANH", UnaryAtanh},
	{"RB_UNARY_HARDSWISH", UnaryHardSwish}, {"RB_UNARY_LEAKYRELU", UnaryLeakyRelu}, {"RB_UNARY_ELU", UnaryElu},
	{"RB_UNARY_CELU", UnaryCelu}, {"RB_UNARY_SELU", UnarySelu}, {"RB_UNARY_THRESHOLDEDRELU", UnaryThresholdedRelu},
	{"RB_UNARY_HARDSIGMOID", UnaryHardSigmoid}, {"RB_UNARY_SCALE", UnaryScale},
	{"RB_UNARY_GELU_TANH", UnaryGeluTanh},

	{"RB_BINARY_ADD", BinaryAdd}, {"RB_BINARY_SUB", BinarySub}, {"RB_BINARY_MUL", BinaryMul},
	{"RB_BINARY_DIV", BinaryDiv}, {"RB_BINARY_POW", BinaryPow}, {"RB_BINARY_MAX", BinaryMax},
	{"RB_BINARY_MIN", BinaryMin}, {"RB_BINARY_PRELU", BinaryPRelu}, {"RB_BINARY_FIRST", BinaryFirst},

	{"RB_REDUCE_MEAN", ReduceMean}, {"RB_REDUCE_SUM", ReduceSum}, {"RB_REDUCE_MAX", ReduceMax},
	{"RB_REDUCE_MIN", ReduceMin}, {"RB_REDUCE_PROD", ReduceProd}, {"RB_REDUCE_L1", ReduceL1},
	{"RB_REDUCE_L2", ReduceL2}, {"RB_REDUCE_LOGSUM", ReduceLogSum}, {"RB_REDUCE_LOGSUMEXP", ReduceLogSumExp},
	{"RB_REDUCE_SUMSQUARE", ReduceSumSquare},

	{"RB_POOL_MAX", PoolMax}, {"RB_POOL_AVERAGE", PoolAverage},

	{"RB_PAD_CONSTANT", PadConstant}, {"RB_PAD_REFLECT", PadReflect}, {"RB_PAD_EDGE", PadEdge},

	{"RB_THREADS", MaxReductionThreads},
}

// prelude is shared by every source: the Shape8 argument type, the
// operation codes, and small helpers. Max and min propagate NaN, as Go's
// max and min (and so the CPU runtime) do; infinities are built from their
// bits because NVRTC has no <math.h> macros.
func prelude() string {
	var b strings.Builder
	b.WriteString("// rulebook: CUDA kernels of the ONNX runtime. Generated prelude.\n")
	b.WriteString("struct Shape8 { long long v[8]; };\n")
	b.WriteString("enum {\n")
	for _, c := range sharedConstants {
		fmt.Fprintf(&b, "  %s = %d,\n", c.name, c.value)
	}
	b.WriteString("};\n")
	b.WriteString(preludeHelpers)
	return b.String()
}

const preludeHelpers = `
// Block-reduction combiners.
enum { RB_COMBINE_SUM = 0, RB_COMBINE_MAX = 1, RB_COMBINE_MIN = 2, RB_COMBINE_PROD = 3 };

// rb_first and rb_step drive grid-stride loops over long long indices.
static __device__ __forceinline__ long long rb_first() {
  return (long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x;
}
static __device__ __forceinline__ long long rb_step() {
  return (long long)gridDim.x * (long long)blockDim.x;
}
static __device__ __forceinline__ float rb_inff() { return __int_as_float(0x7f800000); }
static __device__ __forceinline__ double rb_inf() { return __longlong_as_double(0x7ff0000000000000LL); }
static __device__ __forceinline__ float rb_maxf(float a, float b) {
  if (a != a || b != b) return a + b;
  return a > b ? a : b;
}
static __device__ __forceinline__ float rb_minf(float a, float b) {
  if (a != a || b != b) return a + b;
  return a < b ? a : b;
}
static __device__ __forceinline__ double rb_maxd(double a, double b) {
  if (a != a || b != b) return a + b;
  return a > b ? a : b;
}
static __device__ __forceinline__ double rb_mind(double a, double b) {
  if (a != a || b != b) return a + b;
  return a < b ? a : b;
}

// rb_offset maps flat index i over dims[0..rank) (row-major, the last
// dimension fastest) to the offset sum(index[d] * strides[d]).
static __device__ __forceinline__ long long rb_offset(long long i, int rank, const Shape8& dims, const Shape8& strides) {
  long long off = 0;
  for (int d = rank - 1; d >= 0; d--) {
    long long q = i / dims.v[d];
    off += (i - q * dims.v[d]) * strides.v[d];
    i = q;
  }
  return off;
}

static __device__ __forceinline__ double rb_combine(int how, double a, double b) {
  switch (how) {
  case RB_COMBINE_MAX: return rb_maxd(a, b);
  case RB_COMBINE_MIN: return rb_mind(a, b);
  case RB_COMBINE_PROD: return a * b;
  default: return a + b;
  }
}

// rb_block_reduce combines v over the threads of the block and returns the
// result to every thread. buf is a __shared__ array of RB_THREADS doubles;
// blockDim.x must be a power of two no larger; every thread of the block
// must call it.
static __device__ double rb_block_reduce(double* buf, double v, int how) {
  unsigned t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (t < s) buf[t] = rb_combine(how, buf[t], buf[t + s]);
    __syncthreads();
  }
  double r = buf[0];
  __syncthreads();
  return r;
}
`

func newSource(name, body string) *Source {
	return &Source{Name: name, Code: prelude() + "\n// " + name + " kernels.\n" + body}
}

// Elementwise holds the unary, Clip, broadcasting binary, fill,
// BatchNormalization and erf Gelu kernels. Unary functions are evaluated in double, as
// the CPU runtime does with Go's math package.
var Elementwise = newSource("elementwise", `
static __device__ double rb_unary_op(int op, double x, double a, double b) {
  switch (op) {
  case RB_UNARY_RELU: return (x != x || x > 0.0) ? x : 0.0;
  case RB_UNARY_SQRT: return sqrt(x);
  case RB_UNARY_ERF: return erf(x);
  case RB_UNARY_ABS: return fabs(x);
  case RB_UNARY_NEG: return -x;
  case RB_UNARY_EXP: return exp(x);
  case RB_UNARY_LOG: return log(x);
  case RB_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case RB_UNARY_TANH: return tanh(x);
  case RB_UNARY_RECIPROCAL: return 1.0 / x;
  case RB_UNARY_FLOOR: return floor(x);
  case RB_UNARY_CEIL: return ceil(x);
  case RB_UNARY_ROUND: return rint(x);
  case RB_UNARY_SIGN: return (x == 0.0 || x != x) ? x : (x > 0.0 ? 1.0 : -1.0);
  case RB_UNARY_SOFTPLUS: return log1p(exp(x));
  case RB_UNARY_SOFTSIGN: return x / (1.0 + fabs(x));
  case RB_UNARY_SIN: return sin(x);
  case RB_UNARY_COS: return cos(x);
  case RB_UNARY_TAN: return tan(x);
  case RB_UNARY_ASIN: return asin(x);
  case RB_UNARY_ACOS: return acos(x);
  case RB_UNARY_ATAN: return atan(x);
  case RB_UNARY_SINH: return sinh(x);
  case RB_UNARY_COSH: return cosh(x);
  case RB_UNARY_ASINH: return asinh(x);
  case RB_UNARY_ACOSH: return acosh(x);
  case RB_UNARY_ATANH: return atanh(x);
  case RB_UNARY_HARDSWISH: return x * rb_maxd(0.0, rb_mind(1.0, x / 6.0 + 0.5));
  case RB_UNARY_LEAKYRELU: return x < 0.0 ? a * x : x;
  case RB_UNARY_ELU: return x < 0.0 ? a * expm1(x) : x;
  case RB_UNARY_CELU: return rb_maxd(0.0, x) + rb_mind(0.0, a * expm1(x / a));
  case RB_UNARY_SELU: return b * (x < 0.0 ? a * expm1(x) : x);
  case RB_UNARY_THRESHOLDEDRELU: return x > a ? x : 0.0;
  case RB_UNARY_HARDSIGMOID: return rb_maxd(0.0, rb_mind(1.0, a * x + b));
  case RB_UNARY_SCALE: return a * x;
  case RB_UNARY_GELU_TANH: return x / 2.0 * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  default: return x;
  }
}

// y = op(x) over n elements; y may be x.
extern "C" __global__ void rb_unary(const float* x, float* y, long long n, int op, float alpha, float beta) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    y[i] = (float)rb_unary_op(op, (double)x[i], (double)alpha, (double)beta);
  }
}

// y = min(max(x, lo), hi); a bound read from loPtr or hiPtr when that is not null.
extern "C" __global__ void rb_clip(const float* x, float* y, long long n, float lo, float hi, const float* loPtr, const float* hiPtr) {
  float l = loPtr != 0 ? loPtr[0] : lo;
  float h = hiPtr != 0 ? hiPtr[0] : hi;
  for (long long i = rb_first(); i < n; i += rb_step()) {
    y[i] = rb_minf(rb_maxf(x[i], l), h);
  }
}

static __device__ __forceinline__ float rb_binary_op(int op, float a, float b) {
  switch (op) {
  case RB_BINARY_ADD: return a + b;
  case RB_BINARY_SUB: return a - b;
  case RB_BINARY_MUL: return a * b;
  case RB_BINARY_DIV: return a / b;
  case RB_BINARY_POW: return (float)pow((double)a, (double)b);
  case RB_BINARY_MAX: return rb_maxf(a, b);
  case RB_BINARY_MIN: return rb_minf(a, b);
  case RB_BINARY_PRELU: return a < 0.0f ? a * b : a;
  default: return a;
  }
}

// y[i] = op(a[offA(i)], b[offB(i)]) for the n elements of the output: i
// is split over dims[0..rank) and each operand's offset uses its own
// strides, 0 along the dimensions it is broadcast over. y may be a when
// a's strides are the output's own (element i reads a[i]).
extern "C" __global__ void rb_binary(const float* a, const float* b, float* y, long long n, int op, int rank, Shape8 dims, Shape8 sa, Shape8 sb) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    long long rem = i, oa = 0, ob = 0;
    for (int d = rank - 1; d >= 0; d--) {
      long long q = rem / dims.v[d];
      long long r = rem - q * dims.v[d];
      oa += r * sa.v[d];
      ob += r * sb.v[d];
      rem = q;
    }
    y[i] = rb_binary_op(op, a[oa], b[ob]);
  }
}

extern "C" __global__ void rb_fill(float* y, long long n, float v) {
  for (long long i = rb_first(); i < n; i += rb_step()) y[i] = v;
}

// Gelu as the CPU kernel computes it, (x · (erf(x / div) + add)) · scale,
// float operations in the same order.
extern "C" __global__ void rb_gelu(const float* x, float* y, long long n, float div, float add, float scale) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    float v = x[i];
    y[i] = (v * (erff(v / div) + add)) * scale;
  }
}

// Inference batch normalisation over n elements of planes of size
// elements; channel c = (i / size) % channels.
extern "C" __global__ void rb_batchnorm(const float* x, const float* scale, const float* bias, const float* mean, const float* var, float* y, long long n, long long size, long long channels, float eps) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    long long c = (i / size) % channels;
    float s = (float)((double)scale[c] / sqrt((double)var[c] + (double)eps));
    float t = bias[c] - mean[c] * s;
    y[i] = x[i] * s + t;
  }
}
`)

// Conv holds im2col: the column matrix of one image, all groups, for a
// matrix product with the weights. Row r = (channel·kh + i)·kw + j, column
// p = oy·outW + ox holds the input element kernel tap (i, j) of the
// channel sees at output position p, or 0 in the padding.
var Conv = newSource("conv", `
extern "C" __global__ void rb_im2col(const float* x, float* cols, long long total, int height, int width, int kh, int kw, int sh, int sw, int dh, int dw, int pt, int pl, int outH, int outW) {
  long long plane = (long long)outH * (long long)outW;
  long long taps = (long long)kh * (long long)kw;
  for (long long i = rb_first(); i < total; i += rb_step()) {
    long long r = i / plane;
    long long p = i - r * plane;
    long long ch = r / taps;
    int tap = (int)(r - ch * taps);
    int ki = tap / kw, kj = tap - (tap / kw) * kw;
    int oy = (int)(p / outW), ox = (int)(p - (p / outW) * outW);
    int iy = oy * sh - pt + ki * dh;
    int ix = ox * sw - pl + kj * dw;
    float v = 0.0f;
    if (iy >= 0 && iy < height && ix >= 0 && ix < width) {
      v = x[(ch * height + iy) * (long long)width + ix];
    }
    cols[i] = v;
  }
}
`)

// Pool holds MaxPool/AveragePool over up to three spatial dimensions and
// the global pools. rb_pool reads, per spatial dimension d and output
// index o, the first and one-past-last kernel tap inside the input and
// the number of taps inside input and padding from tab: for each d in
// turn, out_d firsts, out_d lasts, out_d padded counts.
var Pool = newSource("pool", `
extern "C" __global__ void rb_pool(const float* x, float* y, long long total, int kind, int includePad, Shape8 io, Shape8 sd, Shape8 pb, const long long* tab) {
  long long in1 = io.v[1], in2 = io.v[2];
  long long out0 = io.v[3], out1 = io.v[4], out2 = io.v[5];
  long long inPlane = io.v[0] * in1 * in2;
  long long outPlane = out0 * out1 * out2;
  const long long* t0 = tab;
  const long long* t1 = tab + 3 * out0;
  const long long* t2 = tab + 3 * (out0 + out1);
  for (long long i = rb_first(); i < total; i += rb_step()) {
    long long p = i / outPlane;
    long long r = i - p * outPlane;
    long long o2 = r % out2;
    r /= out2;
    long long o1 = r % out1;
    long long o0 = r / out1;
    long long f0 = t0[o0], l0 = t0[out0 + o0], c0 = t0[2 * out0 + o0];
    long long f1 = t1[o1], l1 = t1[out1 + o1], c1 = t1[2 * out1 + o1];
    long long f2 = t2[o2], l2 = t2[out2 + o2], c2 = t2[2 * out2 + o2];
    long long b0 = o0 * sd.v[0] - pb.v[0];
    long long b1 = o1 * sd.v[1] - pb.v[1];
    long long b2 = o2 * sd.v[2] - pb.v[2];
    const float* src = x + p * inPlane;
    float acc = kind == RB_POOL_MAX ? -rb_inff() : 0.0f;
    for (long long j0 = f0; j0 < l0; j0++) {
      long long row0 = (b0 + j0 * sd.v[3]) * in1;
      for (long long j1 = f1; j1 < l1; j1++) {
        long long row = (row0 + b1 + j1 * sd.v[4]) * in2;
        for (long long j2 = f2; j2 < l2; j2++) {
          float v = src[row + b2 + j2 * sd.v[5]];
          acc = kind == RB_POOL_MAX ? rb_maxf(acc, v) : acc + v;
        }
      }
    }
    if (kind != RB_POOL_MAX) {
      long long count = includePad ? c0 * c1 * c2 : (l0 - f0) * (l1 - f1) * (l2 - f2);
      acc = acc / (float)count;
    }
    y[i] = acc;
  }
}

// One block per plane of size elements: its mean, or its maximum.
extern "C" __global__ void rb_global_pool(const float* x, float* y, long long size, int kind) {
  __shared__ double buf[RB_THREADS];
  const float* src = x + (long long)blockIdx.x * size;
  double acc = kind == RB_POOL_MAX ? -rb_inf() : 0.0;
  for (long long i = threadIdx.x; i < size; i += blockDim.x) {
    double v = (double)src[i];
    acc = kind == RB_POOL_MAX ? rb_maxd(acc, v) : acc + v;
  }
  acc = rb_block_reduce(buf, acc, kind == RB_POOL_MAX ? RB_COMBINE_MAX : RB_COMBINE_SUM);
  if (threadIdx.x == 0) {
    y[blockIdx.x] = (float)(kind == RB_POOL_MAX ? acc : acc / (double)size);
  }
}
`)

// Layout holds the kernels that move elements: Transpose (the output walked
// in order, the input read through permuted strides), Concat and Split
// (one piece at a time: outer blocks of blockLen elements, the piece
// pieceLen elements at offset in each), Pad and Gather. Slice is a
// transpose whose strides are the steps' (negative ones walk backwards)
// from the first element taken.
var Layout = newSource("layout", `
extern "C" __global__ void rb_transpose(const float* x, float* y, long long n, int rank, Shape8 dims, Shape8 strides) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    y[i] = x[rb_offset(i, rank, dims, strides)];
  }
}

extern "C" __global__ void rb_concat(const float* x, float* y, long long n, long long pieceLen, long long blockLen, long long offset) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    long long b = i / pieceLen;
    y[b * blockLen + offset + (i - b * pieceLen)] = x[i];
  }
}

extern "C" __global__ void rb_split(const float* x, float* y, long long n, long long pieceLen, long long blockLen, long long offset) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    long long b = i / pieceLen;
    y[i] = x[b * blockLen + offset + (i - b * pieceLen)];
  }
}

// Gather along an axis with the indices resolved at load: output element
// i is (outer block b, pick j, inner element r) and reads input element
// (b·axisLen + picks[j])·inner + r.
extern "C" __global__ void rb_gather(const float* x, float* y, long long n, long long inner, long long axisLen, long long count, const long long* picks) {
  for (long long i = rb_first(); i < n; i += rb_step()) {
    long long q = i / inner;
    long long r = i - q * inner;
    long long b = q / count;
    long long j = q - b * count;
    y[i] = x[(b * axisLen + picks[j]) * inner + r];
  }
}

// rb_pad_source maps index i along an axis of size n, possibly outside it,
// to the input index it shows, or -1 for the constant.
static __device__ __forceinline__ long long rb_pad_source(int mode, long long i, long long n) {
  if (i >= 0 && i < n) return i;
  if (mode == RB_PAD_EDGE) return i < 0 ? 0 : n - 1;
  if (mode == RB_PAD_REFLECT) {
    if (n == 1) return 0;
    long long period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    if (i >= n) i = period - i;
    return i;
  }
  return -1;
}

// Output element i shows input element (out index - begin) per axis, or the
// pad value (read from valuePtr when that is not null).
extern "C" __global__ void rb_pad(const float* x, float* y, long long n, int rank, int mode, float value, const float* valuePtr, Shape8 inDims, Shape8 outDims, Shape8 begin) {
  float v = valuePtr != 0 ? valuePtr[0] : value;
  for (long long i = rb_first(); i < n; i += rb_step()) {
    long long rem = i, off = 0, stride = 1;
    int outside = 0;
    for (int d = rank - 1; d >= 0; d--) {
      long long q = rem / outDims.v[d];
      long long s = rb_pad_source(mode, rem - q * outDims.v[d] - begin.v[d], inDims.v[d]);
      rem = q;
      if (s < 0) outside = 1;
      off += s * stride;
      stride *= inDims.v[d];
    }
    y[i] = outside ? v : x[off];
  }
}
`)

// Reduce holds Softmax/LogSoftmax (one block per line of length elements
// at stride inner) and the reductions (one block per output element,
// gathering count elements at base + j, or at base + offsets[j] when
// offsets is not null, base found from the output index through the kept
// dimensions), and LayerNormalization (one block per row). Sums are taken
// in double, as the CPU runtime does.
var Reduce = newSource("reduce", `
extern "C" __global__ void rb_softmax(const float* x, float* y, long long length, long long inner, int logMode) {
  __shared__ double buf[RB_THREADS];
  long long line = blockIdx.x;
  long long start = (line / inner) * length * inner + line % inner;
  const float* src = x + start;
  float* dst = y + start;
  double m = -rb_inf();
  for (long long i = threadIdx.x; i < length; i += blockDim.x) m = rb_maxd(m, (double)src[i * inner]);
  float mf = (float)rb_block_reduce(buf, m, RB_COMBINE_MAX);
  double sum = 0.0;
  for (long long i = threadIdx.x; i < length; i += blockDim.x) sum += exp((double)(src[i * inner] - mf));
  sum = rb_block_reduce(buf, sum, RB_COMBINE_SUM);
  if (logMode) {
    float shift = mf + (float)log(sum);
    for (long long i = threadIdx.x; i < length; i += blockDim.x) dst[i * inner] = src[i * inner] - shift;
  } else {
    float inv = (float)(1.0 / sum);
    for (long long i = threadIdx.x; i < length; i += blockDim.x) {
      dst[i * inner] = (float)exp((double)(src[i * inner] - mf)) * inv;
    }
  }
}

// LayerNormalization, one block per row of size elements: the mean and
// the variance about it in double, then y = (float)((x − mean)·inv)·scale
// (+ bias), as the CPU kernel computes it. bias, mean and invStd may be
// null (no bias; outputs not wanted).
extern "C" __global__ void rb_layernorm(const float* x, const float* scale, const float* bias, float* y, float* mean, float* invStd, long long size, float eps) {
  __shared__ double buf[RB_THREADS];
  long long row = blockIdx.x;
  const float* src = x + row * size;
  float* dst = y + row * size;
  double sum = 0.0;
  for (long long i = threadIdx.x; i < size; i += blockDim.x) sum += (double)src[i];
  double mu = rb_block_reduce(buf, sum, RB_COMBINE_SUM) / (double)size;
  double sq = 0.0;
  for (long long i = threadIdx.x; i < size; i += blockDim.x) {
    double d = (double)src[i] - mu;
    sq += d * d;
  }
  sq = rb_block_reduce(buf, sq, RB_COMBINE_SUM);
  double inv = 1.0 / sqrt(sq / (double)size + (double)eps);
  if (threadIdx.x == 0) {
    if (mean != 0) mean[row] = (float)mu;
    if (invStd != 0) invStd[row] = (float)inv;
  }
  for (long long i = threadIdx.x; i < size; i += blockDim.x) {
    float v = (float)(((double)src[i] - mu) * inv) * scale[i];
    if (bias != 0) v += bias[i];
    dst[i] = v;
  }
}

static __device__ __forceinline__ double rb_reduce_add(int kind, double acc, double x, double shift) {
  switch (kind) {
  case RB_REDUCE_MAX: return rb_maxd(acc, x);
  case RB_REDUCE_MIN: return rb_mind(acc, x);
  case RB_REDUCE_PROD: return acc * x;
  case RB_REDUCE_L1: return acc + fabs(x);
  case RB_REDUCE_L2: return acc + x * x;
  case RB_REDUCE_SUMSQUARE: return acc + x * x;
  case RB_REDUCE_LOGSUMEXP: return acc + exp(x - shift);
  default: return acc + x;
  }
}

static __device__ __forceinline__ double rb_reduce_result(int kind, double acc, long long count, double shift) {
  switch (kind) {
  case RB_REDUCE_MEAN: return acc / (double)count;
  case RB_REDUCE_L2: return sqrt(acc);
  case RB_REDUCE_LOGSUM: return log(acc);
  case RB_REDUCE_LOGSUMEXP: return shift + log(acc);
  default: return acc;
  }
}

extern "C" __global__ void rb_reduce(const float* x, float* y, long long count, int kind, int keptRank, Shape8 keptDims, Shape8 keptStrides, const long long* offsets) {
  __shared__ double buf[RB_THREADS];
  long long o = blockIdx.x;
  long long base = rb_offset(o, keptRank, keptDims, keptStrides);
  double shift = 0.0;
  if (kind == RB_REDUCE_LOGSUMEXP) {
    double m = -rb_inf();
    for (long long j = threadIdx.x; j < count; j += blockDim.x) {
      m = rb_maxd(m, (double)x[base + (offsets != 0 ? offsets[j] : j)]);
    }
    shift = rb_block_reduce(buf, m, RB_COMBINE_MAX);
  }
  int how = RB_COMBINE_SUM;
  double acc = 0.0;
  if (kind == RB_REDUCE_MAX) { how = RB_COMBINE_MAX; acc = -rb_inf(); }
  if (kind == RB_REDUCE_MIN) { how = RB_COMBINE_MIN; acc = rb_inf(); }
  if (kind == RB_REDUCE_PROD) { how = RB_COMBINE_PROD; acc = 1.0; }
  for (long long j = threadIdx.x; j < count; j += blockDim.x) {
    acc = rb_reduce_add(kind, acc, (double)x[base + (offsets != 0 ? offsets[j] : j)], shift);
  }
  acc = rb_block_reduce(buf, acc, how);
  if (threadIdx.x == 0) y[o] = (float)rb_reduce_result(kind, acc, count, shift);
}
`)

// Sources lists every kernel source.
func Sources() []*Source { return []*Source{Elementwise, Conv, Pool, Layout, Reduce} }

// KernelNames lists, per source, the kernels the runtime launches.
var KernelNames = map[*Source][]string{
	Elementwise: {KernelUnary, KernelClip, KernelBinary, KernelFill, KernelBatchNorm, KernelGelu},
	Conv:        {KernelIm2col},
	Pool:        {KernelPool, KernelGlobalPool},
	Layout:      {KernelTranspose, KernelConcat, KernelSplit, KernelPad, KernelGather},
	Reduce:      {KernelSoftmax, KernelReduce, KernelLayerNorm},
}
