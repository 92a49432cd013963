package exchange

import (
	"fmt"

	"rulebook/rules"
)

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

// opParams are an operator's parameters, by TASO's keys.
type opParams struct {
	op *rules.Op // ours, for its name in reasons
	m  map[rules.TASOParam]int
}

func (p opParams) has(key rules.TASOParam) bool { _, ok := p.m[key]; return ok }

// ours turns TASO's parameters of an operator into our parameter list, or
// says why they cannot be expressed.
func (p opParams) ours() ([]int, string) {
	switch p.op.Name {
	case "conv2d":
		return p.conv()
	case "pool_max", "pool_avg":
		return p.pool()
	case "concat":
		if n, ok := p.m[rules.PMNumInputs]; ok && n != 2 {
			return nil, fmt.Sprintf("concat of %d inputs", n)
		}
		axis := p.m[rules.PMAxis]
		if d, ok := p.m[rules.PMNumDim]; ok && axis >= d {
			return nil, fmt.Sprintf("concat: axis %d of a %d-dimensional tensor", axis, d)
		}
		return []int{axis}, ""
	case "split":
		if n, ok := p.m[rules.PMNumOutputs]; ok && n != 2 {
			return nil, fmt.Sprintf("split into %d outputs", n)
		}
		return []int{p.m[rules.PMAxis]}, ""
	case "transpose":
		if d, ok := p.m[rules.PMNumDim]; ok && d != 2 {
			return nil, fmt.Sprintf("transpose of a %d-dimensional tensor", d)
		}
		if perm := p.m[rules.PMPerm]; perm != tasoSwap {
			return nil, fmt.Sprintf("transpose: permutation %d is not the swap of two axes (%d)", perm, tasoSwap)
		}
	case "matmul":
		_, reason := p.activation(false)
		return nil, reason
	case "enlarge", "C_pool", "I_conv":
		kernel, reason := p.square(rules.PMKernelH, rules.PMKernelW, "kernel")
		return []int{kernel}, reason
	case "partition", "combine", "ff_replicate", "ff_reduce":
		// FlexFlow's reading (rules.FlexFlowReading) keeps the dimension
		// of replicate and reduce.
		return []int{p.m[rules.PMParallelDim], p.m[rules.PMParallelDegree]}, ""
	case "replicate", "reduce":
		// FlexFlow names a dimension for these; our tensors have one
		// replica dimension, so PM_PARALLEL_DIM is read and dropped.
		return []int{p.m[rules.PMParallelDegree]}, ""
	case "linear", "ff_linear":
		act, reason := p.activation(true)
		return []int{act}, reason
	}
	return nil, ""
}

// conv reads conv2d's stride, padding, activation and groups; TASO leaves
// groups to the shapes (see guessGroups), FlexFlow may give PM_GROUP.
func (p opParams) conv() ([]int, string) {
	stride, reason := p.square(rules.PMStrideH, rules.PMStrideW, "stride")
	if reason != "" {
		return nil, reason
	}
	pad, reason := p.padding()
	if reason != "" {
		return nil, reason
	}
	act, reason := p.activation(true)
	if reason != "" {
		return nil, reason
	}
	groups := rules.GroupsInferred
	if g, ok := p.m[rules.PMGroup]; ok {
		if g < 1 {
			return nil, fmt.Sprintf("conv2d: %s %d", rules.PMGroup, g)
		}
		groups = g
	}
	return []int{stride, pad, act, groups}, ""
}

// pool reads a pooling operator's kernel, stride and padding; TASO's pools
// carry an activation that must be none.
func (p opParams) pool() ([]int, string) {
	if t, ok := p.m[rules.PMOpType]; ok && t != int(p.op.TASO.Type) {
		return nil, fmt.Sprintf("%s: %s %d disagrees with the operator type", p.op.Name, rules.PMOpType, t)
	}
	kernel, reason := p.square(rules.PMKernelH, rules.PMKernelW, "kernel")
	if reason != "" {
		return nil, reason
	}
	stride, reason := p.square(rules.PMStrideH, rules.PMStrideW, "stride")
	if reason != "" {
		return nil, reason
	}
	pad, reason := p.padding()
	if reason != "" {
		return nil, reason
	}
	if _, reason := p.activation(false); reason != "" {
		return nil, reason
	}
	return []int{kernel, stride, pad}, ""
}

func checkParam(spec rules.ParamSpec, v int) string {
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

func (p opParams) square(h, w rules.TASOParam, what string) (int, string) {
	if p.m[h] != p.m[w] {
		return 0, fmt.Sprintf("%s: %s height and width differ", p.op.Name, what)
	}
	return p.m[h], ""
}

func (p opParams) padding() (int, string) {
	switch v := p.m[rules.PMPad]; v {
	case tasoPadSame:
		return rules.PadSame, ""
	case tasoPadValid:
		return rules.PadValid, ""
	default:
		return 0, fmt.Sprintf("%s: padding %d", p.op.Name, v)
	}
}

// activation maps PM_ACTI; withRelu says whether the operator has a fused
// relu.
func (p opParams) activation(withRelu bool) (int, string) {
	switch v := p.m[rules.PMActi]; {
	case v == tasoActNone:
		return rules.ActNone, ""
	case v == tasoActRelu && withRelu:
		return rules.ActRelu, ""
	case v == tasoActRelu:
		return 0, fmt.Sprintf("%s with relu activation", p.op.Name)
	case v == tasoActSigmoid:
		return 0, fmt.Sprintf("%s with sigmoid activation", p.op.Name)
	case v == tasoActTanh:
		return 0, fmt.Sprintf("%s with tanh activation", p.op.Name)
	default:
		return 0, fmt.Sprintf("%s: activation %d", p.op.Name, v)
	}
}
