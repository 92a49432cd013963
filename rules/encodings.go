package rules

import (
	"fmt"
	"iter"
	"slices"
)

// How an operator's parameters are written as TASO's parameter keys, which
// TASO's protobuf carries by number and FlexFlow's JSON by name, and how
// they are read back. Each row's Keys holds its encoding; the writers and
// readers in exchange take every such fact from there.

// KeyValue is one parameter as TASO's schema carries it.
type KeyValue struct {
	Key   TASOParam
	Value int
}

// EncodeSite is what an encoding may ask of the rule around a node: the
// formats state some sizes a rule leaves to its shapes.
type EncodeSite interface {
	// Kernel is the height and width of the kernel at operand i, where the
	// rule tells them.
	Kernel(operand int) (h, w int, ok bool)
	// Rank is the rank of the node's result, -1 when nothing fixes it.
	Rank() int
	// Parallel reports whether the rule uses parallel operators.
	Parallel() bool
}

// KeyEncoding is how an operator's parameters become TASO's keys and back.
type KeyEncoding struct {
	// Encode writes the parameters as keys, in the order written.
	Encode func(op *Op, p []int, at EncodeSite) []KeyValue
	// Decode reads the keys a file gives (those the forms allow, with the
	// required ones present) into parameters, or says why the operator
	// cannot express them.
	Decode func(op *Op, keys map[TASOParam]int) ([]int, error)
	// Inferred lists the parameters, by index, that the formats leave to
	// the shapes (conv2d's groups). Decode gives them GroupsInferred, and
	// Settle fills them in where no shapes do.
	Inferred []int
	// Settle fills in the parameters left to the shapes, from the
	// operators at its operands (nil for a graph input).
	Settle func(p []int, operands []*Op) []int
	// Kernel is the extent of the square kernel the operator makes
	// (enlarge and the kernel constants); nil when it makes none.
	Kernel func(p []int) int
	// Spatial lists the operands whose height and width the result keeps,
	// where the size of a kernel may be found.
	Spatial func(p []int) []int
	// DropsDim says that the operator reads FlexFlow's PM_PARALLEL_DIM and
	// drops it: our tensors have one replica dimension.
	DropsDim bool
}

// RankRule is what an operator says of the ranks of its tensors. TASO's
// format states ranks a rule leaves open (concat's PM_NUMDIM), which a
// writer infers from these.
type RankRule struct {
	// Alike lists the operands whose rank is the results'. An operator's
	// results always share one rank.
	Alike []int
	// Result is the results' rank, 0 when the operator does not fix it.
	Result int
	// Operands gives the ranks the operator fixes for operands, by index.
	Operands map[int]int
	// Hint is the results' rank when nothing else fixes it, 0 for none
	// (matmul's operands are matrices unless something says batches).
	Hint int
}

// TASO's values of PM_ACTI and PM_PAD, and of PM_PERM for a matrix.
const (
	tasoActNone    = 0
	tasoActSigmoid = 1
	tasoActRelu    = 2
	tasoActTanh    = 3
	tasoPadSame    = 0
	tasoPadValid   = 1
	// tasoSwap is TASO's index of the permutation (1, 0): permutations are
	// numbered as base-numdim numbers whose digits are the permutation.
	tasoSwap = 2
)

// Defaults for what TASO needs and our rules do not say.
const (
	// defaultKernel is the conv2d kernel height and width written when
	// neither the rule's shapes nor its kernel operand tell (TASO's own
	// rules mostly use 3×3 kernels).
	defaultKernel = 3
	// defaultNumDim is the concat rank written when nothing in the rule
	// fixes it (TASO's activations are 4-D).
	defaultNumDim = 4
	// parallelNumDim is the concat rank written in a parallel rule when
	// nothing fixes it: FlexFlow's parallel rules concatenate 3-D tensors.
	parallelNumDim = 3
	// replicaDim is the PM_PARALLEL_DIM written for replicate and reduce,
	// whose single replica dimension FlexFlow's format names by a number.
	replicaDim = 0
)

// EncodeKeys writes the parameters of an application as TASO's keys.
func (op *Op) EncodeKeys(p []int, at EncodeSite) []KeyValue {
	return op.Keys.Encode(op, p, at)
}

// DecodeKeys reads TASO's keys into the operator's parameters and checks
// each against its ParamSpec; a parameter left to the shapes passes.
func (op *Op) DecodeKeys(keys map[TASOParam]int) ([]int, error) {
	p, err := op.Keys.Decode(op, keys)
	if err != nil {
		return nil, err
	}
	for i, spec := range op.Params {
		if slices.Contains(op.Keys.Inferred, i) && p[i] == GroupsInferred {
			continue
		}
		if err := checkValue(spec, p[i]); err != "" {
			return nil, fmt.Errorf("%s: %s", op.Name, err)
		}
	}
	return p, nil
}

// checkValue says why a value is outside a parameter's domain, or "".
func checkValue(spec ParamSpec, v int) string {
	if spec.Symbols != nil {
		if v < 0 || v >= len(spec.Symbols) {
			return fmt.Sprintf("%s %d", spec.Name, v)
		}
		return ""
	}
	if _, ok := spec.Named[v]; ok || v >= spec.Min && v <= spec.Max {
		return ""
	}
	return fmt.Sprintf("%s %d outside [%d, %d]", spec.Name, v, spec.Min, spec.Max)
}

// ParamValues yields each parameter of the node with its spec, in order.
func (n Node) ParamValues() iter.Seq2[ParamSpec, int] { return n.Op.ParamValues(n.Params) }

// ---- the encodings, by the rows that use them ----

// plainKeys is the encoding of an operator without parameters whose
// result keeps the height and width of the operands listed.
func plainKeys(keeps ...int) KeyEncoding {
	e := KeyEncoding{
		Encode: func(*Op, []int, EncodeSite) []KeyValue { return nil },
		Decode: func(*Op, map[TASOParam]int) ([]int, error) { return nil, nil },
	}
	if keeps != nil {
		e.Spatial = func([]int) []int { return keeps }
	}
	return e
}

// convKeys writes conv2d's stride, padding and activation, with a kernel
// size inferred from the rule. Groups are not written: TASO infers them
// from shapes. FlexFlow may give PM_GROUP.
func convKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(_ *Op, p []int, at EncodeSite) []KeyValue {
			c := ConvOf(p)
			h, w, ok := at.Kernel(1)
			if !ok {
				h, w = defaultKernel, defaultKernel
			}
			return []KeyValue{{PMKernelH, h}, {PMKernelW, w}, {PMStrideH, c.Stride}, {PMStrideW, c.Stride},
				{PMPad, tasoPad(c.Padding)}, {PMActi, tasoAct(c.Activation)}}
		},
		Decode:   decodeConv,
		Inferred: []int{3},
		Settle:   settleConvGroups,
	}
}

func decodeConv(op *Op, keys map[TASOParam]int) ([]int, error) {
	k := keyReader{op, keys}
	stride, err := k.square(PMStrideH, PMStrideW, "stride")
	if err != nil {
		return nil, err
	}
	pad, err := k.padding()
	if err != nil {
		return nil, err
	}
	act, err := k.activation(true)
	if err != nil {
		return nil, err
	}
	groups := GroupsInferred
	if g, ok := keys[PMGroup]; ok {
		if g < 1 {
			return nil, fmt.Errorf("%s: %s %d", op.Name, PMGroup, g)
		}
		groups = g
	}
	return ConvAttrs{Stride: stride, Padding: pad, Activation: act, Groups: groups}.Params(), nil
}

// settleConvGroups settles the groups TASO leaves to the shapes when no
// shapes from its pool fit: depth-wise over a C_pool kernel, else 1.
func settleConvGroups(p []int, operands []*Op) []int {
	c := ConvOf(p)
	if c.Groups != GroupsInferred {
		return p
	}
	c.Groups = 1
	if k := operands[1]; k != nil && k.Name == NameCPool {
		c.Groups = GroupsDepthwise
	}
	return c.Params()
}

// poolKeys writes a pool's window with its own type as PM_OP_TYPE; TASO's
// pools carry an activation, which must be none.
func poolKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(op *Op, p []int, _ EncodeSite) []KeyValue {
			w := WindowOf(p)
			return []KeyValue{{PMOpType, int(op.TASO.Type)}, {PMKernelH, w.Kernel}, {PMKernelW, w.Kernel},
				{PMStrideH, w.Stride}, {PMStrideW, w.Stride}, {PMPad, tasoPad(w.Padding)}, {PMActi, tasoActNone}}
		},
		Decode: decodePool,
	}
}

func decodePool(op *Op, keys map[TASOParam]int) ([]int, error) {
	k := keyReader{op, keys}
	if t, ok := keys[PMOpType]; ok && t != int(op.TASO.Type) {
		return nil, fmt.Errorf("%s: %s %d disagrees with the operator type", op.Name, PMOpType, t)
	}
	kernel, err := k.square(PMKernelH, PMKernelW, "kernel")
	if err != nil {
		return nil, err
	}
	stride, err := k.square(PMStrideH, PMStrideW, "stride")
	if err != nil {
		return nil, err
	}
	pad, err := k.padding()
	if err != nil {
		return nil, err
	}
	if _, err := k.activation(false); err != nil {
		return nil, err
	}
	return WindowAttrs{Kernel: kernel, Stride: stride, Padding: pad}.Params(), nil
}

// concatKeys writes concat of two inputs with its rank, which the rule
// may leave open: the rank inferred, else TASO's 4 (FlexFlow's 3 in a
// parallel rule), and at least enough for the axis.
func concatKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(_ *Op, p []int, at EncodeSite) []KeyValue {
			axis := AxisOf(p).Axis
			dim := at.Rank()
			if dim < 0 {
				dim = defaultNumDim
				if at.Parallel() {
					dim = parallelNumDim
				}
			}
			return []KeyValue{{PMNumInputs, 2}, {PMAxis, axis}, {PMNumDim, max(dim, axis+1)}}
		},
		Decode: func(op *Op, keys map[TASOParam]int) ([]int, error) {
			if n, ok := keys[PMNumInputs]; ok && n != 2 {
				return nil, fmt.Errorf("%s of %d inputs", op.Name, n)
			}
			axis := keys[PMAxis]
			if d, ok := keys[PMNumDim]; ok && axis >= d {
				return nil, fmt.Errorf("%s: axis %d of a %d-dimensional tensor", op.Name, axis, d)
			}
			return AxisAttrs{Axis: axis}.Params(), nil
		},
		// Concatenated along the batch or channels, the result keeps the
		// operands' height and width.
		Spatial: func(p []int) []int {
			if AxisOf(p).Axis < 2 {
				return []int{0, 1}
			}
			return nil
		},
	}
}

// splitKeys writes split into two outputs.
func splitKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(_ *Op, p []int, _ EncodeSite) []KeyValue {
			return []KeyValue{{PMNumOutputs, 2}, {PMAxis, AxisOf(p).Axis}}
		},
		Decode: func(op *Op, keys map[TASOParam]int) ([]int, error) {
			if n, ok := keys[PMNumOutputs]; ok && n != 2 {
				return nil, fmt.Errorf("%s into %d outputs", op.Name, n)
			}
			return AxisAttrs{Axis: keys[PMAxis]}.Params(), nil
		},
		Spatial: func([]int) []int { return []int{0} },
	}
}

// transposeKeys writes the swap of a matrix's axes. PM_OUTSHUFFLE 0 is
// TASO's default, a transpose without a copy; read, it is a layout flag
// and ignored.
func transposeKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(*Op, []int, EncodeSite) []KeyValue {
			return []KeyValue{{PMNumDim, 2}, {PMPerm, tasoSwap}, {PMOutShuffle, 0}}
		},
		Decode: func(op *Op, keys map[TASOParam]int) ([]int, error) {
			if d, ok := keys[PMNumDim]; ok && d != 2 {
				return nil, fmt.Errorf("%s of a %d-dimensional tensor", op.Name, d)
			}
			if perm := keys[PMPerm]; perm != tasoSwap {
				return nil, fmt.Errorf("%s: permutation %d is not the swap of two axes (%d)", op.Name, perm, tasoSwap)
			}
			return nil, nil
		},
	}
}

// matmulKeys writes matmul's activation, which is none.
func matmulKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(*Op, []int, EncodeSite) []KeyValue { return []KeyValue{{PMActi, tasoActNone}} },
		Decode: func(op *Op, keys map[TASOParam]int) ([]int, error) {
			_, err := keyReader{op, keys}.activation(false)
			return nil, err
		},
	}
}

// kernelKeys writes the square kernel of enlarge and the kernel constants.
func kernelKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(_ *Op, p []int, _ EncodeSite) []KeyValue {
			k := KernelOf(p).Kernel
			return []KeyValue{{PMKernelH, k}, {PMKernelW, k}}
		},
		Decode: func(op *Op, keys map[TASOParam]int) ([]int, error) {
			kernel, err := keyReader{op, keys}.square(PMKernelH, PMKernelW, "kernel")
			if err != nil {
				return nil, err
			}
			return KernelAttrs{Kernel: kernel}.Params(), nil
		},
		Kernel: func(p []int) int { return KernelOf(p).Kernel },
	}
}

// cutKeys writes the dimension and degree of partition and combine, and
// of FlexFlow's replicate and reduce under its own reading.
func cutKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(_ *Op, p []int, _ EncodeSite) []KeyValue {
			c := CutOf(p)
			return []KeyValue{{PMParallelDim, c.Dim}, {PMParallelDegree, c.Degree}}
		},
		Decode: func(_ *Op, keys map[TASOParam]int) ([]int, error) {
			return CutAttrs{Dim: keys[PMParallelDim], Degree: keys[PMParallelDegree]}.Params(), nil
		},
	}
}

// replicaKeys writes the degree of replicate and reduce. FlexFlow's name a
// dimension; ours have one replica dimension, written as replicaDim, and
// PM_PARALLEL_DIM is read and dropped.
func replicaKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(_ *Op, p []int, _ EncodeSite) []KeyValue {
			return []KeyValue{{PMParallelDim, replicaDim}, {PMParallelDegree, DegreeOf(p).Degree}}
		},
		Decode: func(_ *Op, keys map[TASOParam]int) ([]int, error) {
			return DegreeAttrs{Degree: keys[PMParallelDegree]}.Params(), nil
		},
		DropsDim: true,
	}
}

// linearKeys writes linear's activation.
func linearKeys() KeyEncoding {
	return KeyEncoding{
		Encode: func(_ *Op, p []int, _ EncodeSite) []KeyValue {
			return []KeyValue{{PMActi, tasoAct(ActivationOf(p).Activation)}}
		},
		Decode: func(op *Op, keys map[TASOParam]int) ([]int, error) {
			act, err := keyReader{op, keys}.activation(true)
			if err != nil {
				return nil, err
			}
			return ActivationAttrs{Activation: act}.Params(), nil
		},
	}
}

// tasoPad is TASO's PM_PAD of a padding; symmetric padding has none, and
// writers refuse it before.
func tasoPad(padding int) int {
	if padding == PadValid {
		return tasoPadValid
	}
	return tasoPadSame
}

// tasoAct is TASO's PM_ACTI of an activation.
func tasoAct(act int) int {
	if act == ActRelu {
		return tasoActRelu
	}
	return tasoActNone
}

// keyReader reads an operator's keys, naming the operator in reasons.
type keyReader struct {
	op *Op
	m  map[TASOParam]int
}

// square reads a height and width that must agree.
func (k keyReader) square(h, w TASOParam, what string) (int, error) {
	if k.m[h] != k.m[w] {
		return 0, fmt.Errorf("%s: %s height and width differ", k.op.Name, what)
	}
	return k.m[h], nil
}

func (k keyReader) padding() (int, error) {
	switch v := k.m[PMPad]; v {
	case tasoPadSame:
		return PadSame, nil
	case tasoPadValid:
		return PadValid, nil
	default:
		return 0, fmt.Errorf("%s: padding %d", k.op.Name, v)
	}
}

// activation maps PM_ACTI; withRelu says whether the operator has a fused
// relu.
func (k keyReader) activation(withRelu bool) (int, error) {
	switch v := k.m[PMActi]; {
	case v == tasoActNone:
		return ActNone, nil
	case v == tasoActRelu && withRelu:
		return ActRelu, nil
	case v == tasoActRelu:
		return 0, fmt.Errorf("%s with relu activation", k.op.Name)
	case v == tasoActSigmoid:
		return 0, fmt.Errorf("%s with sigmoid activation", k.op.Name)
	case v == tasoActTanh:
		return 0, fmt.Errorf("%s with tanh activation", k.op.Name)
	default:
		return 0, fmt.Errorf("%s: activation %d", k.op.Name, v)
	}
}
