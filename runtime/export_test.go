package runtime

import (
	"context"
	"slices"
	"testing"

	"rulebook/onnx"
)

// TestONNXEmbedsWeights writes a model whose weights file is absent with
// its generated weights embedded (and one with inline weights), reads it
// back and runs both: the outputs must be bit for bit the same, and the
// model must not keep a second copy of its weights.
func TestONNXEmbedsWeights(t *testing.T) {
	for file, generated := range map[string]bool{"squeezenet1_1.onnx": true, "squeezenet1_1-full.onnx": false} {
		t.Run(file, func(t *testing.T) {
			m, report, err := Load(sharedModel(t, file), LoadOptions{Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			if (len(report.RandomWeights) > 0) != generated {
				t.Fatalf("generated weights %v, want some: %v", report.RandomWeights, generated)
			}
			src, err := m.ONNX()
			if err != nil {
				t.Fatal(err)
			}
			if n := len(src.Graph.ExternalLocations()); n != 0 {
				t.Errorf("the embedded model still names %d external files", n)
			}
			for _, init := range m.src.Graph.Initializers {
				if init.RawData != nil || init.FloatData != nil || init.DataLocation != onnx.LocationDefault {
					t.Fatalf("the model keeps initializer %q's data twice, or where it came from", init.Name)
				}
			}
			decoded, err := onnx.DecodeModel(onnx.EncodeModel(src))
			if err != nil {
				t.Fatal(err)
			}
			back, report2, err := FromONNX(decoded, t.TempDir(), LoadOptions{Weights: WeightsFile})
			if err != nil {
				t.Fatal(err)
			}
			if len(report2.RandomWeights) != 0 {
				t.Errorf("the embedded model still generates %v", report2.RandomWeights)
			}
			feeds := m.RandomInputs(1)
			want, got := runOnce(t, m, feeds), runOnce(t, back, feeds)
			for name, w := range want {
				if !slices.Equal(w.Data, got[name].Data) {
					t.Errorf("output %q differs after embedding the weights", name)
				}
			}
		})
	}
}

func runOnce(t *testing.T, m *Model, feeds map[string]*Tensor) map[string]*Tensor {
	t.Helper()
	s, err := m.NewSession(SessionOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := s.Run(context.Background(), feeds)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

// TestNodeModel cuts every distinct configuration out of two models (Pad
// and Reshape read integer constants, Conv and MatMul float ones) and
// loads it back alone: it must be one node of the same configuration,
// fed the inputs TimeNode uses.
func TestNodeModel(t *testing.T) {
	for _, file := range []string{"inception_v3.onnx", "bert_base.onnx"} {
		t.Run(file, func(t *testing.T) {
			m, _, err := Load(sharedModel(t, file), LoadOptions{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range DistinctConfigs(m.Nodes()) {
				checkNodeModel(t, m, n)
			}
		})
	}
}

func checkNodeModel(t *testing.T, m *Model, n NodeInfo) {
	t.Helper()
	nm, feeds, err := m.NodeModel(n.Index)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range nm.Graph.Outputs {
		o.IsTensor = true // the runtime wants tensors declared; another runtime infers them
	}
	one, _, err := FromONNX(nm, t.TempDir(), LoadOptions{})
	if err != nil {
		t.Fatalf("%s: %v", n.ConfigKey(), err)
	}
	nodes := one.Nodes()
	if len(nodes) != 1 || nodes[0].ConfigKey() != n.ConfigKey() {
		t.Fatalf("node %d cut out: %v, want one node of %s", n.Index, nodes, n.ConfigKey())
	}
	for j, in := range m.nodeInputs(n.Index) {
		name := m.src.Graph.Nodes[m.nodes[n.Index].src].Inputs[j]
		if f := feeds[name]; f != nil && !slices.Equal(f.Data, in.Data) {
			t.Errorf("%s: input %q is fed other data than TimeNode's", n.ConfigKey(), name)
		}
	}
}
