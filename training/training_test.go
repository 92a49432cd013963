package training

import (
	"math"
	"strings"
	"testing"

	"rulebook/onnx"

	"rulebook/internal/testfiles"
)

// TestSharedModels: shapes infer at batch 8 on the four shared exports,
// with every float initializer counted once as a parameter (the exports
// fold batch normalization into the convolutions and drop inception's
// auxiliary classifier, so torchvision's 25,557,032 and 27,161,264 are
// smaller here) and forward FLOPs as published (1 multiply-add = 2 FLOPs).
func TestSharedModels(t *testing.T) {
	for _, c := range []struct {
		file   string
		params float64
		gflops float64 // forward, per sample
		tol    float64
	}{
		{"resnet50", 25_507_944, 8.18, 0.03},     // 4.09 GMAC (torchvision)
		{"squeezenet1_1", 1_233_288, 0.70, 0.05}, // 0.35 GMAC (torchvision)
		{"inception_v3", 23_802_088, 11.4, 0.05}, // 5.71 GMAC (torchvision, at 299×299)
		{"bert_base", 85_019_136, 0, 0},
	} {
		m, err := onnx.ReadModel(testfiles.Shared(t, "models", c.file+".onnx"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := FromONNX(m, c.file, 8)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		fwd, bwd := g.Total()
		perSample := fwd.FLOPs / 8 / 1e9
		t.Logf("%s: %d ops, %.0f params, %.2f GFLOP forward per sample, backward %.2f×", c.file, len(g.Ops), g.Params(), perSample, bwd.FLOPs/fwd.FLOPs)
		if c.params > 0 && g.Params() != c.params {
			t.Errorf("%s: %.0f parameters, want %.0f", c.file, g.Params(), c.params)
		}
		if c.gflops > 0 && math.Abs(perSample-c.gflops) > c.tol*c.gflops {
			t.Errorf("%s: %.3f GFLOP per sample, want %.2f ± %.0f%%", c.file, perSample, c.gflops, 100*c.tol)
		}
		if bwd.FLOPs < 1.5*fwd.FLOPs {
			t.Errorf("%s: backward %.3g FLOPs against forward %.3g", c.file, bwd.FLOPs, fwd.FLOPs)
		}
	}
}

// TestBuiltins: parameter counts and products of the built-in workloads.
func TestBuiltins(t *testing.T) {
	h, ffn := int64(1024), int64(4096)
	layer := 4*(h*h+h) + (h*ffn + ffn) + (ffn*h + h) + 2*2*h + 3 + 1 // + GELU's and the scale's constants
	for _, c := range []struct {
		name     string
		params   float64
		products int
	}{
		{"mlp", 16 * (8192*8192 + 8192), 16},
		{"bert-large", float64(24 * layer), 24 * 6},
		{"dlrm", (13*512 + 512) + (512*256 + 256) + (256*64 + 64) + 8*1_000_000*64 + (576*512 + 512) + (512*256 + 256) + (256 + 1), 6},
	} {
		m, err := Builtin(c.name)
		if err != nil {
			t.Fatal(err)
		}
		again, err := onnx.DecodeModel(onnx.EncodeModel(m))
		if err != nil {
			t.Fatalf("%s: the encoded model does not decode: %v", c.name, err)
		}
		g, err := FromONNX(again, c.name, 8)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		products := 0
		for _, op := range g.Ops {
			if op.Product != nil {
				products++
				if op.Module == "" {
					t.Errorf("%s: product %s has no module path", c.name, op.Name)
				}
			}
		}
		if g.Params() != c.params || products != c.products {
			t.Errorf("%s: %.0f parameters, %d weight products; want %.0f, %d", c.name, g.Params(), products, c.params, c.products)
		}
	}
}

// TestModulePath reads module paths as torch.onnx writes scopes.
func TestModulePath(t *testing.T) {
	for name, want := range map[string]string{
		"/layers.0/q/MatMul":                "layers.0.q",
		"/layer1/layer1.0/conv1/Conv":       "layer1.0.conv1",
		"/Relu_3":                           "",
		"/features/features.3/squeeze/Conv": "features.3.squeeze",
	} {
		if got := ModulePath(name); got != want {
			t.Errorf("ModulePath(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestNoBatch: a model whose batch is not given gets one line saying so.
func TestNoBatch(t *testing.T) {
	m, err := onnx.ReadModel(testfiles.Shared(t, "models", "resnet50.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = FromONNX(m, "resnet50", 0)
	if err == nil || !strings.Contains(err.Error(), "no batch dimension (input input has fixed shape [1 3 224 224]); pass --batch N") {
		t.Errorf("resnet50 without a batch: %v", err)
	}
	_, err = FromONNX(MLP(MLPConfig{Layers: 2, Width: 8}), "mlp", 0)
	if err == nil || !strings.Contains(err.Error(), `the batch dimension "batch" of input input has no size; pass --batch N`) {
		t.Errorf("mlp without a batch: %v", err)
	}
}

// TestSaved: what a training step keeps for backward, each storage once,
// as PyTorch's autograd keeps it: a Linear its input, ReLU its output
// (the next Linear's input, counted once), the encoder its 24 S×H-sized
// tensors per layer and sequence with the scores' softmax (8 of them) and
// GELU's input only, and an embedding lookup its indices, not its table.
func TestSaved(t *testing.T) {
	const sh = 512 * 1024 * 4 // one [seq, hidden] tensor in bytes
	for _, c := range []struct {
		name  string
		model *onnx.Model
		batch int64
		want  float64
	}{
		{"mlp", MLP(MLPConfig{Layers: 4, Width: 64}), 8, 4 * 8 * 64 * 4},
		{"encoder layer", Transformer(TransformerConfig{Layers: 1, Hidden: 1024, Heads: 16, FFN: 4096, Seq: 512}), 1,
			24*sh + 2*2*512*4}, // + LayerNorm's mean and rstd per row, twice
		{"dlrm", DLRM(DLRMConfig{Dense: 4, Bottom: []int64{8}, Top: []int64{8, 1}, Tables: 2, Rows: 1000, Dim: 8}), 16,
			16*4*4 + 16*8*4 + 2*16*8 + 16*24*4 + 16*8*4 + 16*1*4}, // dense, ReLU, indices, concat, ReLU, sigmoid
	} {
		g, err := FromONNX(c.model, c.name, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.SavedBytes(); got != c.want {
			t.Errorf("%s: %.0f bytes saved, want %.0f", c.name, got, c.want)
		}
	}
}

// TestLookupWork: an embedding lookup reads the rows it gathers, so its
// work does not grow with the table.
func TestLookupWork(t *testing.T) {
	var work []Work
	for _, rows := range []int64{1000, 1_000_000} {
		g, err := FromONNX(DLRM(DLRMConfig{Dense: 4, Bottom: []int64{8}, Top: []int64{1}, Tables: 1, Rows: rows, Dim: 8}), "dlrm", 16)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range g.Ops {
			if op.Type == "Gather" {
				if !op.Lookup {
					t.Errorf("%s reads rows of its table but is not marked a lookup", op.Name)
				}
				work = append(work, op.Forward, op.Backward)
			}
		}
	}
	if len(work) != 4 || work[0] != work[2] || work[1] != work[3] || work[0].Bytes != 8*16+2*16*8*4 {
		t.Errorf("lookup work at 1000 and 1,000,000 rows: %+v", work)
	}
}

// TestAttention: attention groups are found in the built-in encoder and
// in the shared bert_base export (whose scale is Pow of two Constants),
// with their sizes; fused, they keep Q, K, V, the output and a
// log-sum-exp instead of the scores, and the graph as written is
// unchanged.
func TestAttention(t *testing.T) {
	bert, err := onnx.ReadModel(testfiles.Shared(t, "models", "bert_base.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		model  *onnx.Model
		batch  int64
		groups int
		want   Attention // sizes only
		saved  float64   // bytes, fused
	}{
		{"encoder", Transformer(TransformerConfig{Layers: 2, Hidden: 1024, Heads: 16, FFN: 4096, Seq: 512}), 1, 2,
			Attention{Batch: 1, Heads: 16, SeqQ: 512, SeqK: 512, HeadDim: 64},
			2 * (16*512*1024*4 + 2*2*512*4 + 16*512*4)}, // + LayerNorm's statistics and the log-sum-exp
		{"bert_base", bert, 2, 12, Attention{Batch: 2, Heads: 12, SeqQ: 64, SeqK: 64, HeadDim: 64}, 0},
	} {
		g, err := FromONNX(c.model, c.name, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		as := g.Attentions()
		if len(as) != c.groups {
			t.Fatalf("%s: %d attention groups, want %d", c.name, len(as), c.groups)
		}
		a := *as[0]
		if a.Batch != c.want.Batch || a.Heads != c.want.Heads || a.SeqQ != c.want.SeqQ || a.SeqK != c.want.SeqK || a.HeadDim != c.want.HeadDim {
			t.Errorf("%s: attention %+v, want sizes %+v", c.name, a, c.want)
		}
		before := g.SavedBytes()
		f := g.FuseAttention()
		if g.SavedBytes() != before || g.Fused() || !f.Fused() || f.FuseAttention() != f {
			t.Errorf("%s: fusing changed the graph as written, or fused twice", c.name)
		}
		for _, i := range a.Ops {
			op := f.Ops[i]
			if op.Attention == nil || (i != a.Ops[0] && (op.Forward != Work{} || op.Saved != nil)) || g.Ops[i].Attention != nil {
				t.Errorf("%s: %s in the fused group: %+v", c.name, op.Name, op)
			}
		}
		ff, _ := f.Total()
		gf, _ := g.Total()
		if ff.FLOPs != gf.FLOPs || ff.Bytes >= gf.Bytes {
			t.Errorf("%s: fused forward %+v against %+v as written: same FLOPs, fewer bytes expected", c.name, ff, gf)
		}
		if c.saved > 0 && f.SavedBytes() != c.saved {
			t.Errorf("%s: %.0f bytes saved fused, want %.0f", c.name, f.SavedBytes(), c.saved)
		}
	}
}
