package exchange

import (
	"fmt"

	"rulebook/rules"
)

// TASO's activation and padding values.
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

// opParams reads an operator's parameters.
type opParams struct {
	name string // our operator, for reasons
	m    map[int]int
}

func (p opParams) has(key int) bool { _, ok := p.m[key]; return ok }

// ours turns TASO's parameters of an operator type into our parameter
// list, or says why they cannot be expressed.
func (p opParams) ours(typ int) ([]int, string) {
	switch typ {
	case tConv2D:
		return p.conv()
	case tPoolMax, tPoolAvg:
		return p.pool(typ)
	case tConcat:
		if n, ok := p.m[pmNumInputs]; ok && n != 2 {
			return nil, fmt.Sprintf("concat of %d inputs", n)
		}
		axis := p.m[pmAxis]
		if d, ok := p.m[pmNumDim]; ok && axis >= d {
			return nil, fmt.Sprintf("concat: axis %d of a %d-dimensional tensor", axis, d)
		}
		return []int{axis}, ""
	case tSplit:
		if n, ok := p.m[pmNumOutputs]; ok && n != 2 {
			return nil, fmt.Sprintf("split into %d outputs", n)
		}
		return []int{p.m[pmAxis]}, ""
	case tTranspose:
		if d, ok := p.m[pmNumDim]; ok && d != 2 {
			return nil, fmt.Sprintf("transpose of a %d-dimensional tensor", d)
		}
		if perm := p.m[pmPerm]; perm != tasoSwap {
			return nil, fmt.Sprintf("transpose: permutation %d is not the swap of two axes (%d)", perm, tasoSwap)
		}
	case tMatmul:
		_, reason := p.activation(false)
		return nil, reason
	case tEnlarge, tCPool, tIConv:
		kernel, reason := p.square(pmKernelH, pmKernelW, "kernel")
		return []int{kernel}, reason
	}
	return nil, ""
}

// conv reads conv2d's stride, padding, activation and groups; TASO leaves
// groups to the shapes (see guessGroups), FlexFlow may give PM_GROUP.
func (p opParams) conv() ([]int, string) {
	stride, reason := p.square(pmStrideH, pmStrideW, "stride")
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
	if g, ok := p.m[pmGroup]; ok {
		if g < 1 {
			return nil, fmt.Sprintf("conv2d: PM_GROUP %d", g)
		}
		groups = g
	}
	return []int{stride, pad, act, groups}, ""
}

// pool reads a pooling operator's kernel, stride and padding; TASO's pools
// carry an activation that must be none.
func (p opParams) pool(typ int) ([]int, string) {
	if t, ok := p.m[pmOpType]; ok && t != typ {
		return nil, fmt.Sprintf("%s: PM_OP_TYPE %d disagrees with the operator type", p.name, t)
	}
	kernel, reason := p.square(pmKernelH, pmKernelW, "kernel")
	if reason != "" {
		return nil, reason
	}
	stride, reason := p.square(pmStrideH, pmStrideW, "stride")
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

func (p opParams) square(h, w int, what string) (int, string) {
	if p.m[h] != p.m[w] {
		return 0, fmt.Sprintf("%s: %s height and width differ", p.name, what)
	}
	return p.m[h], ""
}

func (p opParams) padding() (int, string) {
	switch v := p.m[pmPad]; v {
	case tasoPadSame:
		return rules.PadSame, ""
	case tasoPadValid:
		return rules.PadValid, ""
	default:
		return 0, fmt.Sprintf("%s: padding %d", p.name, v)
	}
}

// activation maps PM_ACTI; withRelu says whether the operator has a fused
// relu.
func (p opParams) activation(withRelu bool) (int, string) {
	switch v := p.m[pmActi]; {
	case v == tasoActNone:
		return rules.ActNone, ""
	case v == tasoActRelu && withRelu:
		return rules.ActRelu, ""
	case v == tasoActRelu:
		return 0, fmt.Sprintf("%s with relu activation", p.name)
	case v == tasoActSigmoid:
		return 0, fmt.Sprintf("%s with sigmoid activation", p.name)
	case v == tasoActTanh:
		return 0, fmt.Sprintf("%s with tanh activation", p.name)
	default:
		return 0, fmt.Sprintf("%s: activation %d", p.name, v)
	}
}
