package runtime

import (
	"context"
	"fmt"
	"math"
	"testing"
)

// TestFusedSteps runs shared models with and without fusion and checks
// that the fused session computes the same outputs (to float32 rounding:
// layer normalisation's statistics are float64 when fused) and that the
// expected runs were fused.
func TestFusedSteps(t *testing.T) {
	for _, tc := range []struct {
		file string
		want map[string]int // fused kernels by type
	}{
		{"bert_base.onnx", map[string]int{"*runtime.layerNormKernel": 24, "*runtime.geluKernel": 12, "*runtime.matMulKernel": 72}},
		{"resnet50.onnx", map[string]int{"*runtime.convKernel": 33, "*runtime.binaryKernel": 16}},
		{"squeezenet1_1.onnx", map[string]int{"*runtime.convKernel": 26}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m, _, err := Load(sharedModel(t, tc.file), LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, st := range m.steps(m.valueRoles(), true) {
				if st.kernel != m.nodes[st.node].kernel || len(st.out) != len(m.nodes[st.node].out) {
					got[fmt.Sprintf("%T", st.kernel)]++
				}
			}
			for k, n := range tc.want {
				if got[k] != n {
					t.Errorf("%d fused %s steps, want %d (all fused: %v)", got[k], k, n, got)
				}
			}
			in := m.RandomInputs(3)
			outs := [2]map[string]*Tensor{}
			for i, fuse := range []bool{false, true} {
				s, err := m.newSession(SessionOptions{Threads: 2}, fuse)
				if err != nil {
					t.Fatal(err)
				}
				if outs[i], err = s.Run(context.Background(), in); err != nil {
					t.Fatal(err)
				}
			}
			for name, want := range outs[0] {
				for j, w := range want.Data {
					g := outs[1][name].Data[j]
					if d := math.Abs(float64(g - w)); d > 1e-4+1e-4*math.Abs(float64(w)) || math.IsNaN(float64(g)) {
						t.Fatalf("%s[%d] = %g fused, %g unfused", name, j, g, w)
					}
				}
			}
		})
	}
}

// FusedRuns names the runs the session fuses by their nodes' first
// outputs: bert_base's 24 layer normalisations of nine nodes and 12 GELUs
// of five, each node in one run at most.
func TestFusedRunsNamed(t *testing.T) {
	m, _, err := Load(sharedModel(t, "bert_base.onnx"), LoadOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	runs, sizes, seen := map[Fusion]int{}, map[Fusion]int{}, map[string]bool{}
	for _, r := range m.FusedRuns() {
		runs[r.Kind]++
		sizes[r.Kind] = len(r.Nodes)
		for _, name := range r.Nodes {
			if _, ok := m.Shape(name); !ok || seen[name] {
				t.Fatalf("%s run names %q, not a value or named twice", r.Kind, name)
			}
			seen[name] = true
		}
	}
	if runs[FusedLayerNorm] != 24 || sizes[FusedLayerNorm] != 9 || runs[FusedGELU] != 12 || sizes[FusedGELU] != 5 {
		t.Errorf("runs %v of sizes %v, want 24 layer normalisations of 9 nodes and 12 GELUs of 5", runs, sizes)
	}
}
