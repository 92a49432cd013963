package runtime

import (
	"fmt"
	"math"
	"sort"

	"rulebook/runtime/cuda"
)

// The GPU side of each CPU kernel: planNode reads the prepared kernel
// (its shapes, attributes and precomputed layouts, the same the CPU
// executor uses) and returns a plan whose bind queues the CUDA kernels of
// package cuda's sources and cuBLAS products.

// foldedOps never reach a CUDASession as nodes: Shape is a constant
// (every shape is known at load), and the others are computed at load
// over constants (shape arithmetic); the runtime refuses a model that
// applies them to activations. So there is nothing for the GPU or the CPU
// to run. Cast over an activation is a view (a Cast to
// float32, the runtime's one type), listed with the GPU ops.
var foldedOps = map[string]bool{"Shape": true, "ConstantOfShape": true, "Equal": true, "Where": true,
	"Mod": true, "Range": true, "Not": true, "ScatterND": true}

// viewOps are the op types whose output shares their input's memory:
// no kernel runs for them on the GPU, and none on the CPU unless a
// buffer cannot be shared.
var viewOps = map[string]bool{"Identity": true, "Reshape": true, "Flatten": true, "Squeeze": true, "Unsqueeze": true, "Dropout": true}

// IsView reports whether nodes of the ONNX op type are views, which cost
// a device nothing: the GPU cost model prices them so.
func IsView(op string) bool { return viewOps[op] }

// cudaOps are the op types a CUDASession runs on the GPU.
var cudaOps = map[string]bool{
	// Views: no work at all.
	"Identity": true, "Reshape": true, "Flatten": true, "Squeeze": true, "Unsqueeze": true, "Dropout": true,
	"Cast": true,
	// Matrix products.
	"Conv": true, "MatMul": true, "Gemm": true, "Einsum": true,
	// Windows and reductions.
	"MaxPool": true, "AveragePool": true, "GlobalAveragePool": true, "GlobalMaxPool": true,
	"Softmax": true, "LogSoftmax": true, "LayerNormalization": true,
	"ReduceMean": true, "ReduceSum": true, "ReduceMax": true, "ReduceMin": true, "ReduceProd": true,
	"ReduceL1": true, "ReduceL2": true, "ReduceLogSum": true, "ReduceLogSumExp": true, "ReduceSumSquare": true,
	// Layout.
	"Concat": true, "Split": true, "Transpose": true, "Pad": true, "Expand": true,
	"Slice": true, "Gather": true,
	// Elementwise.
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Pow": true, "PRelu": true,
	"Max": true, "Min": true, "Sum": true, "Mean": true, "Clip": true, "BatchNormalization": true,
	"Relu": true, "Sqrt": true, "Erf": true, "Abs": true, "Neg": true, "Exp": true, "Log": true,
	"Sigmoid": true, "Tanh": true, "Reciprocal": true, "Floor": true, "Ceil": true, "Round": true,
	"Sign": true, "Softplus": true, "Softsign": true, "Sin": true, "Cos": true, "Tan": true,
	"Asin": true, "Acos": true, "Atan": true, "Sinh": true, "Cosh": true, "Asinh": true,
	"Acosh": true, "Atanh": true, "HardSwish": true, "LeakyRelu": true, "Elu": true, "Celu": true,
	"Selu": true, "ThresholdedRelu": true, "HardSigmoid": true, "Gelu": true,
}

// CUDAOps lists the ONNX op types whose nodes a CUDASession runs on the
// GPU, sorted: every operator that can be a node of a prepared model
// (foldedOps are computed at load). A node whose shapes the kernels do
// not take, such as a transpose of more than eight merged dimensions,
// runs its CPU kernel; CUDASession.Fallbacks lists it with the reason.
func CUDAOps() []string {
	var ops []string
	for op := range opTable {
		if cudaOps[op] {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	return ops
}

var cudaUnaryCodes = map[unaryOp]int{
	unaryRelu: cuda.UnaryRelu, unarySqrt: cuda.UnarySqrt, unaryErf: cuda.UnaryErf, unaryAbs: cuda.UnaryAbs,
	unaryNeg: cuda.UnaryNeg, unaryExp: cuda.UnaryExp, unaryLog: cuda.UnaryLog, unarySigmoid: cuda.UnarySigmoid,
	unaryTanh: cuda.UnaryTanh, unaryReciprocal: cuda.UnaryReciprocal, unaryFloor: cuda.UnaryFloor,
	unaryCeil: cuda.UnaryCeil, unaryRound: cuda.UnaryRound, unarySign: cuda.UnarySign,
	unarySoftplus: cuda.UnarySoftplus, unarySoftsign: cuda.UnarySoftsign, unarySin: cuda.UnarySin,
	unaryCos: cuda.UnaryCos, unaryTan: cuda.UnaryTan, unaryAsin: cuda.UnaryAsin, unaryAcos: cuda.UnaryAcos,
	unaryAtan: cuda.UnaryAtan, unarySinh: cuda.UnarySinh, unaryCosh: cuda.UnaryCosh, unaryAsinh: cuda.UnaryAsinh,
	unaryAcosh: cuda.UnaryAcosh, unaryAtanh: cuda.UnaryAtanh, unaryHardSwish: cuda.UnaryHardSwish,
	unaryLeakyRelu: cuda.UnaryLeakyRelu, unaryElu: cuda.UnaryElu, unaryCelu: cuda.UnaryCelu,
	unarySelu: cuda.UnarySelu, unaryThresholdedRelu: cuda.UnaryThresholdedRelu,
	unaryHardSigmoid: cuda.UnaryHardSigmoid, unaryGeluTanh: cuda.UnaryGeluTanh,
}

var cudaBinaryCodes = map[binaryOp]int{
	binaryAdd: cuda.BinaryAdd, binarySub: cuda.BinarySub, binaryMul: cuda.BinaryMul, binaryDiv: cuda.BinaryDiv,
	binaryPow: cuda.BinaryPow, binaryMax: cuda.BinaryMax, binaryMin: cuda.BinaryMin, binaryPRelu: cuda.BinaryPRelu,
}

var cudaReduceCodes = map[reduceKind]int{
	reduceMean: cuda.ReduceMean, reduceSum: cuda.ReduceSum, reduceMax: cuda.ReduceMax, reduceMin: cuda.ReduceMin,
	reduceProd: cuda.ReduceProd, reduceL1: cuda.ReduceL1, reduceL2: cuda.ReduceL2, reduceLogSum: cuda.ReduceLogSum,
	reduceLogSumExp: cuda.ReduceLogSumExp, reduceSumSquare: cuda.ReduceSumSquare,
}

var cudaPoolCodes = map[poolKind]int{poolMax: cuda.PoolMax, poolAverage: cuda.PoolAverage}

var cudaPadCodes = map[padMode]int{padConstant: cuda.PadConstant, padReflect: cuda.PadReflect, padEdge: cuda.PadEdge}

const (
	// cudaBlock is the block size of the 1-D (grid-stride) kernels.
	cudaBlock = 256
	// cudaMaxGrid caps their grids; the loop covers larger counts.
	cudaMaxGrid = 1 << 15
	// cudaMaxRank is what a Shape8 argument holds.
	cudaMaxRank = 8
)

// planNode prepares a node for the GPU, or for its CPU kernel.
func (s *CUDASession) planNode(n *node) (*cudaNodePlan, error) {
	if s.opt.cpuOps[n.op] {
		return s.fallbackPlan(n, "sent to the CPU by the session's options"), nil
	}
	p, reason, err := s.gpuPlan(n)
	if err != nil {
		return nil, err
	}
	if reason != "" {
		return s.fallbackPlan(n, reason), nil
	}
	return p, nil
}

func (s *CUDASession) elems(id int) int {
	if id < 0 {
		return 0
	}
	return numElements(s.model.values[id].shape)
}

func (s *CUDASession) gpuPlan(n *node) (*cudaNodePlan, string, error) {
	if !cudaOps[n.op] {
		return nil, fmt.Sprintf("no CUDA kernel for %s", n.op), nil
	}
	switch k := n.kernel.(type) {
	case unaryKernel:
		return s.planUnary(n, k)
	case *clipKernel:
		return s.planClip(n, k)
	case *binaryKernel:
		return s.planBinary(n, k)
	case *variadicKernel:
		return s.planVariadic(n, k)
	case *expandKernel:
		return s.planExpand(n, k)
	case *batchNormKernel:
		return s.planBatchNorm(n, k)
	case *convKernel:
		return s.planConv(n, k)
	case *matMulKernel:
		return s.planMatMul(n, k)
	case *gemmKernel:
		return s.planGemm(n, k)
	case *poolKernel:
		return s.planPool(n, k)
	case globalPoolKernel:
		return s.planGlobalPool(n, k)
	case concatKernel:
		return s.planConcat(n, k)
	case splitKernel:
		return s.planSplit(n, k)
	case *transposeKernel:
		return s.planTranspose(n, k)
	case *padKernel:
		return s.planPad(n, k)
	case *softmaxKernel:
		return s.planSoftmax(n, k)
	case *reduceKernel:
		return s.planReduce(n, k)
	case *layerNormKernel:
		return s.planLayerNorm(n, k)
	case *geluKernel:
		return s.planGelu(n, k)
	case *sliceStrides:
		return s.planSlice(n, k)
	case *gatherKernel:
		return s.planGather(n, k)
	case *einsumPlan:
		return s.planEinsum(n, k)
	}
	return nil, fmt.Sprintf("no CUDA kernel for %s's CPU kernel %T", n.op, n.kernel), nil
}

// seq runs steps in order, skipping nil ones.
func seq(steps ...func() error) func() error {
	var live []func() error
	for _, st := range steps {
		if st != nil {
			live = append(live, st)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func() error {
		for _, st := range live {
			if err := st(); err != nil {
				return err
			}
		}
		return nil
	}
}

// function looks a kernel up and checks the arguments against it.
func (s *CUDASession) function(src *cuda.Source, name string, args *cuda.Args) (*cuda.Function, error) {
	f, err := s.dev.Function(src, name)
	if err != nil {
		return nil, err
	}
	return f, f.CheckArgs(args)
}

// kernel1D returns a launch of a grid-stride kernel over n elements; nil
// when n is 0.
func (s *CUDASession) kernel1D(src *cuda.Source, name string, n int, args *cuda.Args) (func() error, error) {
	f, err := s.function(src, name, args)
	if err != nil || n <= 0 {
		return nil, err
	}
	grid := cuda.Dim3{X: uint32(min((n+cudaBlock-1)/cudaBlock, cudaMaxGrid)), Y: 1, Z: 1}
	block := cuda.Dim3{X: cudaBlock, Y: 1, Z: 1}
	return func() error { return s.dev.Launch(f, grid, block, args) }, nil
}

// kernelBlocks returns a launch of a reduction kernel with one block of
// the backend's reduction size per line; nil when there are no lines.
func (s *CUDASession) kernelBlocks(src *cuda.Source, name string, lines int, args *cuda.Args) (func() error, error) {
	f, err := s.function(src, name, args)
	if err != nil || lines <= 0 {
		return nil, err
	}
	if lines > math.MaxInt32 {
		return nil, fmt.Errorf("%s: %d blocks exceed the grid", name, lines)
	}
	grid := cuda.Dim3{X: uint32(lines), Y: 1, Z: 1}
	block := cuda.Dim3{X: uint32(s.dev.ReductionThreads()), Y: 1, Z: 1}
	return func() error { return s.dev.Launch(f, grid, block, args) }, nil
}

// unaryStep applies a unary operation (y may be x).
func (s *CUDASession) unaryStep(code int, x, y cuda.Ptr, n int, alpha, beta float32) (func() error, error) {
	args := cuda.NewArgs().Ptr(x).Ptr(y).I64(n).I32(code).F32(alpha).F32(beta)
	return s.kernel1D(cuda.Elementwise, cuda.KernelUnary, n, args)
}

func (s *CUDASession) fillStep(y cuda.Ptr, n int, v float32) (func() error, error) {
	return s.kernel1D(cuda.Elementwise, cuda.KernelFill, n, cuda.NewArgs().Ptr(y).I64(n).F32(v))
}

// broadcastStep computes y = op(a, b) over the n output elements with the
// CPU kernels' broadcast layout (merged dimensions, per-operand strides).
func (s *CUDASession) broadcastStep(code int, a, b, y cuda.Ptr, l *broadcastLayout, n int) (func() error, error) {
	args := cuda.NewArgs().Ptr(a).Ptr(b).Ptr(y).I64(n).I32(code).I32(len(l.dims)).Shape(l.dims).Shape(l.sa).Shape(l.sb)
	return s.kernel1D(cuda.Elementwise, cuda.KernelBinary, n, args)
}

// cudaRowMajorGemm describes C = alpha·op(A)·op(B) + beta·C for row-major
// matrices (op(A) m×k, op(B) k×n, C m×n; batch of them, each operand
// advanced by its element stride) as the column-major product cuBLAS
// computes.
//
// cuBLAS reads a matrix column-major: element (i, j) at X[i + j·ld]. A
// row-major r×c matrix whose rows are ld long, read that way, is its c×r
// transpose. So cuBLAS, given B's memory as its first operand and A's as
// its second, with m and n swapped, computes op(B)ᵀ·op(A)ᵀ = (op(A)·op(B))ᵀ
// as an n×m column-major matrix with leading dimension n, which is
// exactly C = op(A)·op(B) read row-major. Each transposition flag stays
// with its matrix (B's becomes cuBLAS's transa, A's its transb), and the
// leading dimensions are the stored row lengths: k for A (m if
// transposed), n for B (k if transposed), n for C.
func cudaRowMajorGemm(transA, transB bool, m, n, k int, alpha float32, a cuda.Ptr, strideA int,
	b cuda.Ptr, strideB int, beta float32, c cuda.Ptr, strideC int, batch int) *cuda.Gemm {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	return &cuda.Gemm{
		TransA: transB, TransB: transA,
		M: n, N: m, K: k,
		Alpha: alpha, Beta: beta,
		A: b, LDA: max(ldb, 1), StrideA: strideB,
		B: a, LDB: max(lda, 1), StrideB: strideA,
		C: c, LDC: max(n, 1), StrideC: strideC,
		Batch: batch,
	}
}

// gemmStep queues a product. With k = 0 it does what the product means,
// C = beta·C, with a kernel rather than trusting every cuBLAS version with
// an empty inner dimension; C must then be contiguous over the batch.
func (s *CUDASession) gemmStep(g *cuda.Gemm) (func() error, error) {
	if g.M == 0 || g.N == 0 || g.Batch == 0 {
		return nil, nil
	}
	if g.K == 0 {
		if g.Batch > 1 && g.StrideC != g.M*g.N {
			return nil, fmt.Errorf("empty product over a strided batch")
		}
		size := g.M * g.N * g.Batch
		switch g.Beta {
		case 0:
			return s.fillStep(g.C, size, 0)
		case 1:
			return nil, nil
		}
		return s.unaryStep(cuda.UnaryScale, g.C, g.C, size, g.Beta, 0)
	}
	g.Precision = s.opt.precision
	return func() error { return s.dev.Gemm(g) }, nil
}

func (s *CUDASession) planUnary(n *node, k unaryKernel) (*cudaNodePlan, string, error) {
	code, ok := cudaUnaryCodes[k.op]
	if !ok {
		return nil, fmt.Sprintf("unary operation %d has no CUDA code", k.op), nil
	}
	size := s.elems(n.out[0])
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		return s.unaryStep(code, in[0], out[0], size, k.alpha, k.beta)
	}}, "", nil
}

func (s *CUDASession) planClip(n *node, k *clipKernel) (*cudaNodePlan, string, error) {
	size := s.elems(n.out[0])
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		var lo, hi cuda.Ptr
		if k.loInput >= 0 {
			lo = in[k.loInput]
		}
		if k.hiInput >= 0 {
			hi = in[k.hiInput]
		}
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(size).F32(k.lo).F32(k.hi).Ptr(lo).Ptr(hi)
		return s.kernel1D(cuda.Elementwise, cuda.KernelClip, size, args)
	}}, "", nil
}

func (s *CUDASession) planBinary(n *node, k *binaryKernel) (*cudaNodePlan, string, error) {
	code, ok := cudaBinaryCodes[k.op]
	if !ok {
		return nil, fmt.Sprintf("binary operation %d has no CUDA code", k.op), nil
	}
	if len(k.layout.dims) > cudaMaxRank {
		return nil, fmt.Sprintf("broadcast over %d merged dimensions (the kernel takes %d)", len(k.layout.dims), cudaMaxRank), nil
	}
	size := s.elems(n.out[0])
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		return s.broadcastStep(code, in[0], in[1], out[0], &k.layout, size)
	}}, "", nil
}

func (s *CUDASession) planVariadic(n *node, k *variadicKernel) (*cudaNodePlan, string, error) {
	if len(k.first.dims) > cudaMaxRank {
		return nil, fmt.Sprintf("broadcast over %d merged dimensions (the kernel takes %d)", len(k.first.dims), cudaMaxRank), nil
	}
	codes := make([]int, len(k.rest))
	for i, r := range k.rest {
		code, ok := cudaBinaryCodes[r.op]
		if !ok {
			return nil, fmt.Sprintf("binary operation %d has no CUDA code", r.op), nil
		}
		if len(r.layout.dims) > cudaMaxRank {
			return nil, fmt.Sprintf("broadcast over %d merged dimensions (the kernel takes %d)", len(r.layout.dims), cudaMaxRank), nil
		}
		codes[i] = code
	}
	size := s.elems(n.out[0])
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		// Input 0 broadcast into the output, then each further input
		// folded in place: the output is the kernel's first operand with
		// its own strides, so element i reads and writes y[i] only.
		first, err := s.broadcastStep(cuda.BinaryFirst, in[0], in[0], out[0], &k.first, size)
		if err != nil {
			return nil, err
		}
		steps := []func() error{first}
		for i, r := range k.rest {
			st, err := s.broadcastStep(codes[i], out[0], in[i+1], out[0], &r.layout, size)
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
		if k.mean {
			st, err := s.unaryStep(cuda.UnaryScale, out[0], out[0], size, 1/float32(len(in)), 0)
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
		return seq(steps...), nil
	}}, "", nil
}

func (s *CUDASession) planExpand(n *node, k *expandKernel) (*cudaNodePlan, string, error) {
	if len(k.layout.dims) > cudaMaxRank {
		return nil, fmt.Sprintf("broadcast over %d merged dimensions (the kernel takes %d)", len(k.layout.dims), cudaMaxRank), nil
	}
	size := s.elems(n.out[0])
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		return s.broadcastStep(cuda.BinaryFirst, in[0], in[0], out[0], &k.layout, size)
	}}, "", nil
}

func (s *CUDASession) planBatchNorm(n *node, k *batchNormKernel) (*cudaNodePlan, string, error) {
	size := k.batch * k.channels * k.size
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(in[1]).Ptr(in[2]).Ptr(in[3]).Ptr(in[4]).Ptr(out[0]).
			I64(size).I64(k.size).I64(k.channels).F32(k.epsilon)
		return s.kernel1D(cuda.Elementwise, cuda.KernelBatchNorm, size, args)
	}}, "", nil
}

// planConv runs a convolution through cuDNN where it can (planCuDNNConv),
// else as the CPU kernel does, one image at a time:
// im2col gathers the image's column matrix (all groups: group g's rows
// are the g-th block of C/group·kh·kw) into the session's workspace, and
// one strided-batched product over the groups computes
// Y_g (M/g × oh·ow) = W_g (M/g × C/g·kh·kw) · cols_g. A 1×1 kernel with
// stride 1 and no padding needs no gathering. With a bias the output is
// first filled with it and the product accumulates (beta = 1).
func (s *CUDASession) planConv(n *node, k *convKernel) (*cudaNodePlan, string, error) {
	if p := s.planCuDNNConv(k, n); p != nil {
		return p, "", nil
	}
	outShape := s.model.values[n.out[0]].shape
	plane := k.outH * k.outW
	kg := k.channels / k.group * k.kh * k.kw
	mg := k.filters / k.group
	colsSize := 0
	if !k.direct {
		colsSize = k.channels * k.kh * k.kw * plane
	}
	var biasLayout broadcastLayout
	if k.hasBias {
		bias := make([]int, len(outShape))
		for i := range bias {
			bias[i] = 1
		}
		bias[1] = k.filters
		biasLayout = newBroadcastLayout(bias, bias, outShape)
	}
	return &cudaNodePlan{scratch: colsSize, bind: func(in, out []cuda.Ptr) (func() error, error) {
		var steps []func() error
		beta := float32(0)
		if k.hasBias {
			st, err := s.broadcastStep(cuda.BinaryFirst, in[2], in[2], out[0], &biasLayout, numElements(outShape))
			if err != nil {
				return nil, err
			}
			steps, beta = append(steps, st), 1
		}
		for b := range k.batch {
			x := in[0].Offset(b * k.channels * k.height * k.width)
			y := out[0].Offset(b * k.filters * plane)
			cols := x
			if !k.direct {
				args := cuda.NewArgs().Ptr(x).Ptr(s.scratch).I64(colsSize).
					I32(k.height).I32(k.width).I32(k.kh).I32(k.kw).I32(k.sh).I32(k.sw).
					I32(k.dh).I32(k.dw).I32(k.pt).I32(k.pl).I32(k.outH).I32(k.outW)
				st, err := s.kernel1D(cuda.Conv, cuda.KernelIm2col, colsSize, args)
				if err != nil {
					return nil, err
				}
				steps, cols = append(steps, st), s.scratch
			}
			st, err := s.gemmStep(cudaRowMajorGemm(false, false, mg, plane, kg, 1,
				in[1], mg*kg, cols, kg*plane, beta, y, mg*plane, k.group))
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
		if s.fusedRelu[n] {
			// cuDNN was to apply the Relu, whose node is a view now.
			st, err := s.unaryStep(cuda.UnaryRelu, out[0], out[0], numElements(outShape), 0, 0)
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
		return seq(steps...), nil
	}}, "", nil
}

// planMatMul issues one strided-batched product when every batch of each
// operand is a fixed stride from the previous (all batches, or one matrix
// broadcast), else one product per batch.
func (s *CUDASession) planMatMul(n *node, k *matMulKernel) (*cudaNodePlan, string, error) {
	if ep := s.epilogues[n]; ep != nil {
		return s.planEpilogue(ep, false, false, k.m, k.n, k.k, 1), "", nil
	}
	uniform := len(k.layout.dims) == 1
	aSize, bSize, cSize := k.m*k.k, k.k*k.n, k.m*k.n
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		if uniform {
			return s.gemmStep(cudaRowMajorGemm(false, false, k.m, k.n, k.k, 1,
				in[0], k.layout.sa[0]*aSize, in[1], k.layout.sb[0]*bSize, 0, out[0], cSize, k.batches))
		}
		steps := make([]func() error, k.batches)
		for i := range k.batches {
			aOff, bOff := k.layout.at(i)
			st, err := s.gemmStep(cudaRowMajorGemm(false, false, k.m, k.n, k.k, 1,
				in[0].Offset(aOff*aSize), 0, in[1].Offset(bOff*bSize), 0, 0, out[0].Offset(i*cSize), 0, 1))
			if err != nil {
				return nil, err
			}
			steps[i] = st
		}
		return seq(steps...), nil
	}}, "", nil
}

// planGemm: Y = alpha·op(A)·op(B) + beta·C, C broadcast into Y first.
func (s *CUDASession) planGemm(n *node, k *gemmKernel) (*cudaNodePlan, string, error) {
	if ep := s.epilogues[n]; ep != nil {
		return s.planEpilogue(ep, k.transA, k.transB, k.m, k.n, k.k, k.alpha), "", nil
	}
	if k.hasC && len(k.layout.dims) > cudaMaxRank {
		return nil, "C broadcast over too many dimensions", nil
	}
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		var steps []func() error
		beta := float32(0)
		if k.hasC {
			st, err := s.broadcastStep(cuda.BinaryFirst, in[2], in[2], out[0], &k.layout, k.m*k.n)
			if err != nil {
				return nil, err
			}
			steps, beta = append(steps, st), k.beta
		}
		st, err := s.gemmStep(cudaRowMajorGemm(k.transA, k.transB, k.m, k.n, k.k, k.alpha,
			in[0], 0, in[1], 0, beta, out[0], 0, 1))
		if err != nil {
			return nil, err
		}
		return seq(append(steps, st)...), nil
	}}, "", nil
}

// planPool hands the kernel the CPU kernel's per-dimension tap ranges
// (first and last tap inside the input, taps inside input and padding),
// uploaded once.
func (s *CUDASession) planPool(n *node, k *poolKernel) (*cudaNodePlan, string, error) {
	var tab []int64
	for d := range 3 {
		if len(k.first[d]) != k.out[d] || len(k.last[d]) != k.out[d] || len(k.padded[d]) != k.out[d] {
			return nil, "", fmt.Errorf("pool tables of dimension %d do not match the output", d)
		}
		for _, part := range [][]int{k.first[d], k.last[d], k.padded[d]} {
			for _, v := range part {
				tab = append(tab, int64(v))
			}
		}
	}
	table, err := s.res.uploadInt64s(tab)
	if err != nil {
		return nil, "", err
	}
	total := k.planes * k.out[0] * k.out[1] * k.out[2]
	io := []int{k.in[0], k.in[1], k.in[2], k.out[0], k.out[1], k.out[2]}
	sd := []int{k.strides[0], k.strides[1], k.strides[2], k.dilations[0], k.dilations[1], k.dilations[2]}
	includePad := 0
	if k.includePad {
		includePad = 1
	}
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(total).I32(cudaPoolCodes[k.kind]).I32(includePad).
			Shape(io).Shape(sd).Shape(k.padBegin[:]).Ptr(table)
		return s.kernel1D(cuda.Pool, cuda.KernelPool, total, args)
	}}, "", nil
}

func (s *CUDASession) planGlobalPool(n *node, k globalPoolKernel) (*cudaNodePlan, string, error) {
	if k.planes > math.MaxInt32 {
		return nil, fmt.Sprintf("%d planes exceed the grid", k.planes), nil
	}
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(k.size).I32(cudaPoolCodes[k.kind])
		return s.kernelBlocks(cuda.Pool, cuda.KernelGlobalPool, k.planes, args)
	}}, "", nil
}

// pieces returns, per piece of a Concat or Split, its offset within an
// outer block, and the block's length.
func cudaPieces(k *sliceKernel) (offsets []int, blockLen int) {
	offsets = make([]int, len(k.sizes))
	for i, size := range k.sizes {
		offsets[i] = blockLen
		blockLen += size * k.inner
	}
	return offsets, blockLen
}

func (s *CUDASession) planConcat(n *node, k concatKernel) (*cudaNodePlan, string, error) {
	offsets, blockLen := cudaPieces(k.sliceKernel)
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		var steps []func() error
		for p, size := range k.sizes {
			pieceLen := size * k.inner
			total := k.outer * pieceLen
			args := cuda.NewArgs().Ptr(in[p]).Ptr(out[0]).I64(total).I64(pieceLen).I64(blockLen).I64(offsets[p])
			st, err := s.kernel1D(cuda.Layout, cuda.KernelConcat, total, args)
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
		return seq(steps...), nil
	}}, "", nil
}

func (s *CUDASession) planSplit(n *node, k splitKernel) (*cudaNodePlan, string, error) {
	offsets, blockLen := cudaPieces(k.sliceKernel)
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		var steps []func() error
		for p, size := range k.sizes {
			pieceLen := size * k.inner
			total := k.outer * pieceLen
			if p >= len(out) || n.out[p] < 0 {
				continue
			}
			args := cuda.NewArgs().Ptr(in[0]).Ptr(out[p]).I64(total).I64(pieceLen).I64(blockLen).I64(offsets[p])
			st, err := s.kernel1D(cuda.Layout, cuda.KernelSplit, total, args)
			if err != nil {
				return nil, err
			}
			steps = append(steps, st)
		}
		return seq(steps...), nil
	}}, "", nil
}

func (s *CUDASession) planTranspose(n *node, k *transposeKernel) (*cudaNodePlan, string, error) {
	if len(k.dims) > cudaMaxRank {
		return nil, fmt.Sprintf("transpose over %d merged dimensions (the kernel takes %d)", len(k.dims), cudaMaxRank), nil
	}
	size := s.elems(n.out[0])
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(size).I32(len(k.dims)).Shape(k.dims).Shape(k.strides)
		return s.kernel1D(cuda.Layout, cuda.KernelTranspose, size, args)
	}}, "", nil
}

func (s *CUDASession) planPad(n *node, k *padKernel) (*cudaNodePlan, string, error) {
	if len(k.out) > cudaMaxRank {
		return nil, fmt.Sprintf("padding rank %d (the kernel takes %d)", len(k.out), cudaMaxRank), nil
	}
	size := numElements(k.out)
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		var value cuda.Ptr
		if k.valueInput >= 0 {
			value = in[k.valueInput]
		}
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(size).I32(len(k.out)).I32(cudaPadCodes[k.mode]).
			F32(k.value).Ptr(value).Shape(k.in).Shape(k.out).Shape(k.begin)
		return s.kernel1D(cuda.Layout, cuda.KernelPad, size, args)
	}}, "", nil
}

func (s *CUDASession) planSoftmax(n *node, k *softmaxKernel) (*cudaNodePlan, string, error) {
	lines := k.outer * k.inner
	if lines > math.MaxInt32 {
		return nil, fmt.Sprintf("%d lines exceed the grid", lines), nil
	}
	if k.length == 0 {
		lines = 0 // nothing to compute
	}
	logMode := 0
	if k.log {
		logMode = 1
	}
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(k.length).I64(k.inner).I32(logMode)
		return s.kernelBlocks(cuda.Reduce, cuda.KernelSoftmax, lines, args)
	}}, "", nil
}

// planReduce gives the kernel the kept dimensions (to find each output's
// first element) and, when the reduced axes are not the trailing ones,
// the CPU kernel's table of the gathered elements' relative offsets.
func (s *CUDASession) planReduce(n *node, k *reduceKernel) (*cudaNodePlan, string, error) {
	code, ok := cudaReduceCodes[k.kind]
	if !ok {
		return nil, fmt.Sprintf("reduction %d has no CUDA code", k.kind), nil
	}
	if len(k.keptDims) > cudaMaxRank {
		return nil, fmt.Sprintf("%d kept dimensions (the kernel takes %d)", len(k.keptDims), cudaMaxRank), nil
	}
	outputs := s.elems(n.out[0])
	if outputs > math.MaxInt32 {
		return nil, fmt.Sprintf("%d outputs exceed the grid", outputs), nil
	}
	var table cuda.Ptr
	if !k.contiguous && len(k.offsets) > 0 {
		offsets := make([]int64, len(k.offsets))
		for i, o := range k.offsets {
			offsets[i] = int64(o)
		}
		var err error
		if table, err = s.res.uploadInt64s(offsets); err != nil {
			return nil, "", err
		}
	}
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(k.count).I32(code).I32(len(k.keptDims)).
			Shape(k.keptDims).Shape(k.keptStrides).Ptr(table)
		return s.kernelBlocks(cuda.Reduce, cuda.KernelReduce, outputs, args)
	}}, "", nil
}

// planLayerNorm runs one block per row; the optional Mean and InvStdDev
// outputs are written when the node has them.
func (s *CUDASession) planLayerNorm(n *node, k *layerNormKernel) (*cudaNodePlan, string, error) {
	if k.rows > math.MaxInt32 {
		return nil, fmt.Sprintf("%d rows exceed the grid", k.rows), nil
	}
	rows := k.rows
	if k.size == 0 {
		rows = 0 // nothing to normalise
	}
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		var bias, mean, invStd cuda.Ptr
		if k.bias {
			bias = in[2]
		}
		if len(out) > 1 {
			mean = out[1]
		}
		if len(out) > 2 {
			invStd = out[2]
		}
		args := cuda.NewArgs().Ptr(in[0]).Ptr(in[1]).Ptr(bias).Ptr(out[0]).Ptr(mean).Ptr(invStd).
			I64(k.size).F32(k.epsilon)
		return s.kernelBlocks(cuda.Reduce, cuda.KernelLayerNorm, rows, args)
	}}, "", nil
}

// planGelu is the exact (erf) Gelu; the tanh approximation is a unary
// kernel (unaryGeluTanh).
func (s *CUDASession) planGelu(n *node, k *geluKernel) (*cudaNodePlan, string, error) {
	size := s.elems(n.out[0])
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(size).F32(k.div).F32(k.add).F32(k.scale)
		return s.kernel1D(cuda.Elementwise, cuda.KernelGelu, size, args)
	}}, "", nil
}

// planSlice runs Slice as a transpose kernel: the output walked in order,
// the input read from its first element taken through strides scaled by
// the steps.
func (s *CUDASession) planSlice(n *node, k *sliceStrides) (*cudaNodePlan, string, error) {
	base := 0
	for i := range k.shape {
		base += k.start[i] * k.strides[i]
	}
	dims, strides := stridedLayout(k.shape, k.step, k.strides)
	if len(dims) > cudaMaxRank {
		return nil, fmt.Sprintf("slice over %d merged dimensions (the kernel takes %d)", len(dims), cudaMaxRank), nil
	}
	size := numElements(k.shape)
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0].Offset(base)).Ptr(out[0]).I64(size).I32(len(dims)).Shape(dims).Shape(strides)
		return s.kernel1D(cuda.Layout, cuda.KernelTranspose, size, args)
	}}, "", nil
}

// stridedLayout gives a strided view's dimensions without the ones of
// size 1, merging neighbours that the view walks as one (the outer
// stride the inner dimension's length times the inner stride), and each
// one's input stride (step times the input's own stride).
func stridedLayout(shape, step, inStrides []int) (dims, strides []int) {
	for i, d := range shape {
		if d == 1 {
			continue
		}
		st := step[i] * inStrides[i]
		if last := len(dims) - 1; last >= 0 && strides[last] == st*d {
			dims[last] *= d
			strides[last] = st
			continue
		}
		dims, strides = append(dims, d), append(strides, st)
	}
	if len(dims) == 0 {
		dims, strides = []int{1}, []int{0}
	}
	return dims, strides
}

// planGather uploads the resolved indices once.
func (s *CUDASession) planGather(n *node, k *gatherKernel) (*cudaNodePlan, string, error) {
	picks := make([]int64, len(k.picks))
	for i, p := range k.picks {
		picks[i] = int64(p)
	}
	table, err := s.res.uploadInt64s(picks)
	if err != nil {
		return nil, "", fmt.Errorf("uploading gather indices: %w", err)
	}
	size := k.outer * len(k.picks) * k.inner
	return &cudaNodePlan{bind: func(in, out []cuda.Ptr) (func() error, error) {
		args := cuda.NewArgs().Ptr(in[0]).Ptr(out[0]).I64(size).I64(k.inner).I64(k.axisLen).I64(len(k.picks)).Ptr(table)
		return s.kernel1D(cuda.Layout, cuda.KernelGather, size, args)
	}}, "", nil
}

// planEinsum mirrors the CPU plan: the operands transposed into the
// session's workspace when their layout needs it, one strided-batched
// product (or, with one operand, a sum over the contracted labels), and
// the product transposed into the output.
func (s *CUDASession) planEinsum(n *node, p *einsumPlan) (*cudaNodePlan, string, error) {
	var tA, tB, tOut *transposeKernel
	if p.permA != nil {
		tA = newTransposeKernel(p.shapeA, p.permA)
	}
	if p.permB != nil && !p.unary {
		tB = newTransposeKernel(p.shapeB, p.permB)
	}
	if p.permOut != nil {
		tOut = newTransposeKernel(p.canonical, p.permOut)
	}
	for _, t := range []*transposeKernel{tA, tB, tOut} {
		if t != nil && len(t.dims) > cudaMaxRank {
			return nil, fmt.Sprintf("einsum transpose over %d merged dimensions (the kernel takes %d)", len(t.dims), cudaMaxRank), nil
		}
	}
	if p.unary && p.m > math.MaxInt32 {
		return nil, fmt.Sprintf("%d sums exceed the grid", p.m), nil
	}
	return &cudaNodePlan{scratch: p.scratchSize(0), bind: func(in, out []cuda.Ptr) (func() error, error) {
		return s.einsumSteps(p, tA, tB, tOut, in, out[0])
	}}, "", nil
}

func (s *CUDASession) einsumSteps(p *einsumPlan, tA, tB, tOut *transposeKernel, in []cuda.Ptr, y cuda.Ptr) (func() error, error) {
	free := s.scratch
	take := func(elems int) cuda.Ptr {
		at := free
		free = free.Offset(elems)
		return at
	}
	var steps []func() error
	transpose := func(t *transposeKernel, x, dst cuda.Ptr, size int) error {
		args := cuda.NewArgs().Ptr(x).Ptr(dst).I64(size).I32(len(t.dims)).Shape(t.dims).Shape(t.strides)
		st, err := s.kernel1D(cuda.Layout, cuda.KernelTranspose, size, args)
		steps = append(steps, st)
		return err
	}
	a, b, c := in[0], cuda.Ptr(0), y
	if tA != nil {
		a = take(p.batch * p.m * p.k)
		if err := transpose(tA, in[0], a, p.batch*p.m*p.k); err != nil {
			return nil, err
		}
	}
	if !p.unary {
		b = in[1]
		if tB != nil {
			b = take(p.batch * p.k * p.n)
			if err := transpose(tB, in[1], b, p.batch*p.k*p.n); err != nil {
				return nil, err
			}
		}
	}
	if tOut != nil {
		c = take(p.batch * p.m * p.n)
	}
	product, err := s.einsumProduct(p, a, b, c)
	if err != nil {
		return nil, err
	}
	steps = append(steps, product)
	if tOut != nil {
		if err := transpose(tOut, c, y, p.batch*p.m*p.n); err != nil {
			return nil, err
		}
	}
	return seq(steps...), nil
}

// einsumProduct is C = A·B per batch, or with one operand the sum of each
// of A's m rows of k elements.
func (s *CUDASession) einsumProduct(p *einsumPlan, a, b, c cuda.Ptr) (func() error, error) {
	if p.unary {
		args := cuda.NewArgs().Ptr(a).Ptr(c).I64(p.k).I32(cuda.ReduceSum).I32(1).
			Shape([]int{p.m}).Shape([]int{p.k}).Ptr(0)
		return s.kernelBlocks(cuda.Reduce, cuda.KernelReduce, p.m, args)
	}
	return s.gemmStep(cudaRowMajorGemm(false, false, p.m, p.n, p.k, 1,
		a, p.m*p.k, b, p.k*p.n, 0, c, p.m*p.n, p.batch))
}

// fallbackPlan runs the node's CPU kernel: its non-constant inputs are
// downloaded into host tensors, the kernel runs on them, and its outputs
// are uploaded. Constant inputs are read from the model.
func (s *CUDASession) fallbackPlan(n *node, reason string) *cudaNodePlan {
	m := s.model
	type transfer struct {
		t *Tensor
		p cuda.Ptr
	}
	return &cudaNodePlan{fallback: reason, bind: func(in, out []cuda.Ptr) (func() error, error) {
		var downloads, uploads []transfer
		hostIn := make([]*Tensor, len(n.in))
		for j, id := range n.in {
			if id < 0 {
				continue
			}
			v, r := m.values[id], m.values[s.root[id]]
			if r.isConst() {
				hostIn[j] = &Tensor{Shape: v.shape, Data: r.konst.Data}
				continue
			}
			hostIn[j] = NewTensor(v.shape...)
			downloads = append(downloads, transfer{hostIn[j], in[j]})
		}
		hostOut := make([]*Tensor, len(n.out))
		for j, id := range n.out {
			if id < 0 {
				continue
			}
			hostOut[j] = NewTensor(m.values[id].shape...)
			uploads = append(uploads, transfer{hostOut[j], out[j]})
		}
		step := n.kernel.bind(hostIn, hostOut, s.env)
		return func() error {
			for _, d := range downloads {
				if err := cuda.DownloadFloats(s.dev, d.t.Data, d.p); err != nil {
					return err
				}
			}
			step()
			for _, u := range uploads {
				if err := cuda.UploadFloats(s.dev, u.p, u.t.Data); err != nil {
					return err
				}
			}
			return nil
		}, nil
	}}
}
