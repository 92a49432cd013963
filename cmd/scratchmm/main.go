package main

import (
	"context"
	"fmt"
	"time"

	"rulebook/onnx"
	"rulebook/runtime"
)

func dims(s ...int) []onnx.Dim {
	out := make([]onnx.Dim, len(s))
	for i, d := range s {
		out[i] = onnx.Dim{Value: int64(d), HasValue: true}
	}
	return out
}

func model(n int, count int) *runtime.Model {
	g := &onnx.Graph{Name: "mm", Inputs: []*onnx.ValueInfo{{Name: "x", IsTensor: true, ElemType: onnx.Float, HasShape: true, Shape: dims(1, 64, 768)}}}
	for i := 0; i < count; i++ {
		w := fmt.Sprint("w", i)
		y := fmt.Sprint("y", i)
		raw := make([]byte, 4*768*n)
		g.Initializers = append(g.Initializers, &onnx.Tensor{Name: w, Dims: []int64{768, int64(n)}, DataType: onnx.Float, RawData: raw, HasRawData: true})
		g.Nodes = append(g.Nodes, &onnx.Node{Name: y, OpType: "MatMul", Inputs: []string{"x", w}, Outputs: []string{y}})
		g.Outputs = append(g.Outputs, &onnx.ValueInfo{Name: y, IsTensor: true, ElemType: onnx.Float})
	}
	m := &onnx.Model{IRVersion: 8, OpsetImports: []onnx.OperatorSetID{{Version: 13}}, Graph: g}
	m, _ = onnx.DecodeModel(onnx.EncodeModel(m))
	rt, _, err := runtime.FromONNX(m, "", runtime.LoadOptions{Weights: runtime.WeightsFile})
	if err != nil {
		panic(err)
	}
	return rt
}

func main() {
	for _, c := range []struct{ n, count int }{{768, 3}, {2304, 1}, {3072, 1}, {768, 1}} {
		rt := model(c.n, c.count)
		s, _ := rt.NewSession(runtime.SessionOptions{})
		in := rt.RandomInputs(1)
		s.Run(context.Background(), in)
		best := time.Hour
		for r := 0; r < 50; r++ {
			t := time.Now()
			s.Run(context.Background(), in)
			best = min(best, time.Since(t))
		}
		fmt.Printf("n=%d count=%d: %v\n", c.n, c.count, best)
	}
}
