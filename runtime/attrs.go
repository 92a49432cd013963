package runtime

import (
	"fmt"

	"rulebook/onnx"
)

// attrReader reads a node's attributes with defaults. The first attribute
// of the wrong type is remembered in err, so an operator reads all its
// attributes and checks once.
type attrReader struct {
	n   *onnx.Node
	err error
}

// get returns the attribute if present, recording an error when its type
// is not want.
func (a *attrReader) get(name string, want onnx.AttributeType) *onnx.Attribute {
	at := a.n.Attr(name)
	if at == nil {
		return nil
	}
	if at.Type != want && !(at.Type == onnx.AttrUndefined && want != onnx.AttrTensor) {
		if a.err == nil {
			a.err = fmt.Errorf("attribute %q has type %s, want %s", name, at.Type, want)
		}
		return nil
	}
	return at
}

func (a *attrReader) has(name string) bool { return a.n.Attr(name) != nil }

func (a *attrReader) int(name string, def int64) int64 {
	if at := a.get(name, onnx.AttrInt); at != nil {
		return at.I
	}
	return def
}

func (a *attrReader) float(name string, def float32) float32 {
	if at := a.get(name, onnx.AttrFloat); at != nil {
		return at.F
	}
	return def
}

func (a *attrReader) str(name, def string) string {
	if at := a.get(name, onnx.AttrString); at != nil {
		return at.S
	}
	return def
}

// ints returns the attribute's integers, or def when it is absent.
func (a *attrReader) ints(name string, def []int64) []int64 {
	if at := a.get(name, onnx.AttrInts); at != nil {
		return at.Ints
	}
	return def
}

func (a *attrReader) floats(name string) []float32 {
	if at := a.get(name, onnx.AttrFloats); at != nil {
		return at.Floats
	}
	return nil
}

func (a *attrReader) tensor(name string) *onnx.Tensor {
	if at := a.get(name, onnx.AttrTensor); at != nil {
		return at.T
	}
	return nil
}

// toInts converts attribute integers to ints; nil stays nil (an absent
// attribute).
func toInts(v []int64) []int {
	if v == nil {
		return nil
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// filled returns n copies of x.
func filled(n, x int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = x
	}
	return out
}
