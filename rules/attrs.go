package rules

import (
	"fmt"
	"iter"
	"reflect"
	"strings"
)

// Operator names, for the packages that register facts by operator (the
// optimizer's ONNX adapters). Each is the Name of one registry row.
const (
	NameEwadd       = "ewadd"
	NameEwmul       = "ewmul"
	NameSmul        = "smul"
	NameTranspose   = "transpose"
	NameMatmul      = "matmul"
	NameConv2D      = "conv2d"
	NameEnlarge     = "enlarge"
	NameRelu        = "relu"
	NamePoolAvg     = "pool_avg"
	NamePoolMax     = "pool_max"
	NameConcat      = "concat"
	NameSplit       = "split"
	NameCPool       = "C_pool"
	NameIConv       = "I_conv"
	NameIMatmul     = "I_matmul"
	NameIEwmul      = "I_ewmul"
	NamePartition   = "partition"
	NameCombine     = "combine"
	NameReplicate   = "replicate"
	NameReduce      = "reduce"
	NameLinear      = "linear"
	NameEmbedding   = "embedding"
	NameAttnSoftmax = "attn_softmax"
	NameAttnMix     = "attn_mix"
	NameBatchNorm   = "batchnorm"
)

// Typed parameters, as flexflow-train's op-attrs has them. A node stores
// its parameters as the ints of its row's ParamSpecs, in order; these
// structs name them. Each row's Attrs holds the zero value of its struct,
// and a registry test holds the fields to the ParamSpecs, name by name.

// ConvAttrs are conv2d's parameters.
type ConvAttrs struct{ Stride, Padding, Activation, Groups int }

// WindowAttrs are the pools' parameters.
type WindowAttrs struct{ Kernel, Stride, Padding int }

// KernelAttrs are the parameters of enlarge and the kernel constants.
type KernelAttrs struct{ Kernel int }

// AxisAttrs are the parameters of concat and split.
type AxisAttrs struct{ Axis int }

// ActivationAttrs are linear's parameters.
type ActivationAttrs struct{ Activation int }

// CutAttrs are the parameters of partition and combine.
type CutAttrs struct{ Dim, Degree int }

// DegreeAttrs are the parameters of replicate and reduce.
type DegreeAttrs struct{ Degree int }

// ConvOf names conv2d's parameters.
func ConvOf(p []int) ConvAttrs {
	return ConvAttrs{Stride: p[0], Padding: p[1], Activation: p[2], Groups: p[3]}
}

// Params encodes the attributes as a node stores them.
func (a ConvAttrs) Params() []int { return []int{a.Stride, a.Padding, a.Activation, a.Groups} }

// WindowOf names a pool's parameters.
func WindowOf(p []int) WindowAttrs { return WindowAttrs{Kernel: p[0], Stride: p[1], Padding: p[2]} }

// Params encodes the attributes as a node stores them.
func (a WindowAttrs) Params() []int { return []int{a.Kernel, a.Stride, a.Padding} }

// KernelOf names the kernel extent of enlarge, C_pool and I_conv.
func KernelOf(p []int) KernelAttrs { return KernelAttrs{Kernel: p[0]} }

// Params encodes the attributes as a node stores them.
func (a KernelAttrs) Params() []int { return []int{a.Kernel} }

// AxisOf names the axis of concat and split.
func AxisOf(p []int) AxisAttrs { return AxisAttrs{Axis: p[0]} }

// Params encodes the attributes as a node stores them.
func (a AxisAttrs) Params() []int { return []int{a.Axis} }

// ActivationOf names linear's activation.
func ActivationOf(p []int) ActivationAttrs { return ActivationAttrs{Activation: p[0]} }

// Params encodes the attributes as a node stores them.
func (a ActivationAttrs) Params() []int { return []int{a.Activation} }

// CutOf names the dimension and degree of partition and combine.
func CutOf(p []int) CutAttrs { return CutAttrs{Dim: p[0], Degree: p[1]} }

// Params encodes the attributes as a node stores them.
func (a CutAttrs) Params() []int { return []int{a.Dim, a.Degree} }

// DegreeOf names the degree of replicate and reduce.
func DegreeOf(p []int) DegreeAttrs { return DegreeAttrs{Degree: p[0]} }

// Params encodes the attributes as a node stores them.
func (a DegreeAttrs) Params() []int { return []int{a.Degree} }

// checkAttrs reports whether a row's Attrs struct names its ParamSpecs in
// order: field Stride for ParamSpec "stride". A row without parameters has
// no Attrs.
func checkAttrs(op *Op) error {
	if op.Attrs == nil {
		if len(op.Params) > 0 {
			return fmt.Errorf("%s: %d parameters but no Attrs struct names them", op.Name, len(op.Params))
		}
		return nil
	}
	t := reflect.TypeOf(op.Attrs)
	if t.Kind() != reflect.Struct || t.NumField() != len(op.Params) {
		return fmt.Errorf("%s: Attrs %s does not have one field per parameter (%d)", op.Name, t, len(op.Params))
	}
	for i, p := range op.Params {
		if f := t.Field(i).Name; !strings.EqualFold(f, p.Name) {
			return fmt.Errorf("%s: Attrs %s field %d is %s, but parameter %d is %q", op.Name, t, i, f, i, p.Name)
		}
	}
	return nil
}

// ParamValues yields each of a node's parameter values with its spec, in
// order, for code that handles every parameter alike (formatting, degree
// variables). A value without a spec gets the zero ParamSpec.
func (op *Op) ParamValues(p []int) iter.Seq2[ParamSpec, int] {
	return func(yield func(ParamSpec, int) bool) {
		for i, v := range p {
			var spec ParamSpec
			if i < len(op.Params) {
				spec = op.Params[i]
			}
			if !yield(spec, v) {
				return
			}
		}
	}
}

// Term is conv2d's head at these parameters as rule text writes it,
// "conv2d 1 same none 1": a consumer of a version finds the rules about
// one convolution by it.
func (a ConvAttrs) Term() string {
	op := All().byName[NameConv2D]
	out := op.Name
	for spec, v := range op.ParamValues(a.Params()) {
		out += " " + spec.Format(v)
	}
	return out
}

// UngroupedConvs lists conv2d's parameters without groups or activation
// at every stride and padding the registry has.
func UngroupedConvs() []ConvAttrs {
	op := All().byName[NameConv2D]
	stride, padding := op.Params[0], op.Params[1]
	var out []ConvAttrs
	for s := stride.Min; s <= stride.Max; s++ {
		for p := range padding.Symbols {
			out = append(out, ConvAttrs{Stride: s, Padding: p, Activation: ActNone, Groups: 1})
		}
	}
	return out
}
