package runtime

import "fmt"

// prepareConstant turns a Constant node into its value at load. Opset 12
// added the value_float(s) and value_int(s) shorthands.
func prepareConstant(c *nodeContext) (prepared, error) {
	a := &c.attrs
	var v *value
	var err error
	switch {
	case a.has("value"):
		t := a.tensor("value")
		if t == nil {
			return prepared{}, a.err
		}
		v, err = constantFromTensor(c.node.Outputs[0], t)
	case a.has("value_float"):
		x := a.float("value_float", 0)
		v = &value{shape: []int{}, konst: &Tensor{Shape: []int{}, Data: []float32{x}}}
	case a.has("value_floats"):
		xs := a.floats("value_floats")
		v = &value{shape: []int{len(xs)}, konst: &Tensor{Shape: []int{len(xs)}, Data: append([]float32(nil), xs...)}}
	case a.has("value_int"):
		v = intConstant([]int64{a.int("value_int", 0)}, []int{})
	case a.has("value_ints"):
		xs := a.ints("value_ints", nil)
		v = intConstant(append([]int64{}, xs...), []int{len(xs)})
	default:
		return prepared{}, fmt.Errorf("no value attribute the runtime reads (value, value_float(s), value_int(s)); sparse and string constants are not supported")
	}
	if err != nil {
		return prepared{}, err
	}
	return prepared{consts: []*value{v}}, a.err
}

func intConstant(ints []int64, shape []int) *value {
	data := make([]float32, len(ints))
	for i, x := range ints {
		data[i] = float32(x)
	}
	return &value{shape: shape, ints: ints, konst: &Tensor{Shape: shape, Data: data}}
}
