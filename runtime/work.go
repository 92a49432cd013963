package runtime

import (
	"rulebook/onnx"
	"rulebook/rules"
)

// elementBytes is the size of a float32 element, as the registry counts it.
const elementBytes = rules.ElementBytes

// CostsNothing reports whether an operator moves no data (a view) or
// only computes shapes.
func CostsNothing(opType string) bool { return free[opType] }

var free = map[string]bool{"Reshape": true, "Identity": true, "Constant": true, "Shape": true, "Flatten": true,
	"Squeeze": true, "Unsqueeze": true, "Dropout": true}

// normalising lists the operators that read their input about five
// times: a mean or a sum, then scaling (Softmax, the normalisations).
var normalising = map[string]bool{"GlobalAveragePool": true, "ReduceMean": true, "ReduceSum": true,
	"Softmax": true, "LayerNormalization": true, "BatchNormalization": true}

// NodeWork counts an ONNX node's forward work, the one count of it, with
// the registry's formulas (rules.ProductFLOPs, …). The planner prices
// nodes with it; rules.Op's Work counts the registry's operators, and a
// test holds the two together. in[i] is unused where input i is omitted.
// Each present input is read once and each output written once.
func NodeWork(n *onnx.Node, in, out [][]int64) rules.Work {
	if free[n.OpType] {
		return rules.Work{}
	}
	var read, written float64
	for i, v := range n.Inputs {
		if v != "" {
			read += elementBytes * float64(Elements(in[i]))
		}
	}
	for _, s := range out[:len(n.Outputs)] {
		written += elementBytes * float64(Elements(s))
	}
	outEl := float64(Elements(out[0]))
	w := rules.Work{FLOPs: outEl, Bytes: read + written}
	switch {
	case n.OpType == "MatMul" || n.OpType == "Gemm" || n.OpType == "Conv":
		w.FLOPs = rules.ProductFLOPs(outEl, float64(Contraction(n, in)))
	case n.OpType == "MaxPool" || n.OpType == "AveragePool":
		w.FLOPs = rules.WindowFLOPs(outEl, windowCells(n))
	case normalising[n.OpType]:
		w.FLOPs = rules.NormalisingFLOPs(float64(Elements(in[0])))
	}
	return w
}

// Contraction is a product's inner dimension K: a MatMul's or Gemm's
// shared dimension, a convolution's input channels of one group times its
// kernel cells.
func Contraction(n *onnx.Node, in [][]int64) int64 {
	x, w := in[0], in[1]
	switch n.OpType {
	case "Conv":
		k := w[1]
		for _, d := range w[2:] {
			k *= d
		}
		return k
	case "Gemm":
		if t := n.Attr("transA"); t != nil && t.I == 1 {
			return x[0]
		}
	}
	return x[len(x)-1]
}

// windowCells is a pool's kernel size, as a float so that no product of its
// dimensions wraps.
func windowCells(n *onnx.Node) float64 {
	k := 1.0
	if a := n.Attr("kernel_shape"); a != nil {
		for _, d := range a.Ints {
			k *= float64(d)
		}
	}
	return k
}

// Elements is a shape's element count; the shapes come checked from
// InferShapes or a load.
func Elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}
