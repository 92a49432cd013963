package training

import (
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
)

// BenchmarkFromONNX times a training step's derivation from the shared
// exports at batch 8: the runtime's shape inference without weights, then
// each node's work (go test -run XXX -bench FromONNX -benchmem ./training).
func BenchmarkFromONNX(b *testing.B) {
	for _, name := range []string{"resnet50", "bert_base"} {
		b.Run(name, func(b *testing.B) {
			m, err := onnx.ReadModel(testfiles.Shared(b, "models", name+".onnx"))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for range b.N {
				if _, err := FromONNX(m, name, 8); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
