package runtime

import "slices"

// Shape returns the inferred shape of a value of the model by its ONNX
// name: a graph input, an initializer, a folded constant or a node output.
// Values that folding or Identity elision removed are not known.
func (m *Model) Shape(name string) ([]int, bool) {
	v := m.value(name)
	if v == nil {
		return nil, false
	}
	return slices.Clone(v.shape), true
}

// Constant returns the data of an initializer or folded constant, shared
// with the model: callers must not change it.
func (m *Model) Constant(name string) (*Tensor, bool) {
	v := m.value(name)
	if v == nil || v.konst == nil {
		return nil, false
	}
	return v.konst, true
}

// Integers returns the data of a constant that ONNX types as an integer
// (shape arithmetic folded at load), exactly.
func (m *Model) Integers(name string) ([]int64, bool) {
	v := m.value(name)
	if v == nil || v.ints == nil {
		return nil, false
	}
	return slices.Clone(v.ints), true
}

func (m *Model) value(name string) *value {
	for _, v := range m.values {
		if v.name == name {
			return v
		}
	}
	return nil
}
