package ort

import (
	"fmt"

	onnxruntime "github.com/yalue/onnxruntime_go"

	"rulebook/onnx"
	"rulebook/runtime"
)

// toORT hands t to ONNX Runtime as element type dt: float32 shares t's
// memory, booleans (non-zero is true) and int64 are converted copies.
func toORT(t *runtime.Tensor, dt onnx.DataType) (onnxruntime.Value, error) {
	if t == nil {
		return nil, fmt.Errorf("no data")
	}
	if len(t.Shape) == 0 {
		// The binding cannot describe a shape without dimensions.
		return nil, fmt.Errorf("scalar inputs are not supported")
	}
	shape := make(onnxruntime.Shape, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int64(d)
	}
	switch dt {
	case onnx.Float:
		return onnxruntime.NewTensor(shape, t.Data)
	case onnx.Bool:
		data := make([]bool, len(t.Data))
		for i, x := range t.Data {
			data[i] = x != 0
		}
		return onnxruntime.NewTensor(shape, data)
	case onnx.Int64:
		data := make([]int64, len(t.Data))
		for i, x := range t.Data {
			data[i] = int64(x)
		}
		return onnxruntime.NewTensor(shape, data)
	}
	return nil, fmt.Errorf("element type %s is not supported", dt)
}

// fromORT copies an output into a float32 tensor, the runtime's type.
func fromORT(v onnxruntime.Value) (*runtime.Tensor, error) {
	dims := v.GetShape()
	shape := make([]int, len(dims))
	for i, d := range dims {
		shape[i] = int(d)
	}
	t := runtime.NewTensor(shape...)
	switch o := v.(type) {
	case *onnxruntime.Tensor[float32]:
		copy(t.Data, o.GetData())
	case *onnxruntime.Tensor[float64]:
		convert(t.Data, o.GetData())
	case *onnxruntime.Tensor[int64]:
		convert(t.Data, o.GetData())
	case *onnxruntime.Tensor[int32]:
		convert(t.Data, o.GetData())
	case *onnxruntime.Tensor[bool]:
		for i, b := range o.GetData() {
			if b {
				t.Data[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("ONNX Runtime returned a %T, which the runtime has no type for", v)
	}
	return t, nil
}

func convert[T float64 | int64 | int32](dst []float32, src []T) {
	for i, x := range src {
		dst[i] = float32(x)
	}
}
