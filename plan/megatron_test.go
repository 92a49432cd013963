package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/training"
)

// megatron is the tensor-parallel plan Megatron-LM gives an encoder of
// the given depth: q, k, v and f1 cut by columns, o and f2 by rows.
func megatron(layers int) map[string]string {
	want := map[string]string{}
	for i := 0; i < layers; i++ {
		for m, st := range map[string]string{"q": "colwise", "k": "colwise", "v": "colwise", "o": "rowwise", "f1": "colwise", "f2": "rowwise"} {
			want[fmt.Sprintf("layers.%d.%s", i, m)] = st
		}
	}
	return want
}

// alternating is the plan of an MLP of the given depth: layers cut by
// columns then rows in turn, so that no activation is gathered.
func alternating(layers int) map[string]string {
	want := map[string]string{}
	for i := 0; i < layers; i++ {
		want[fmt.Sprintf("layers.%d", i)] = map[bool]string{true: "colwise", false: "rowwise"}[i%2 == 0]
	}
	return want
}

// torchPlan prices g under dp × tp on one node and turns the result into
// a DTensor plan.
func torchPlan(t *testing.T, g *training.Graph, dp, tp int) (*TorchPlan, error) {
	t.Helper()
	s := Strategy{Kind: Grid, DP: dp, TP: tp, PP: 1, Microbatches: 1}
	r, err := Price(context.Background(), g, s, Options{Machine: machine(dp * tp)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return (&Choice{Model: g.Model, Chosen: r}).Torch(g)
}

// jointTorchPlan is the joint search's plan at dp × tp, as DTensor runs it.
func jointTorchPlan(t *testing.T, g *training.Graph, dp, tp int) (*TorchPlan, error) {
	t.Helper()
	s := Strategy{Kind: Joint, DP: dp, TP: tp, PP: 1, Microbatches: 1}
	r, err := Price(context.Background(), g, s, Options{Machine: machine(dp * tp), Substitutions: parallelVersion(t)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return (&Choice{Model: g.Model, Chosen: r}).Torch(g)
}

func sameModules(got, want map[string]string) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d modules cut, want %d: %v", len(got), len(want), got)
	}
	for m, st := range want {
		if got[m] != st {
			return fmt.Errorf("module %s is %q, want %q", m, got[m], st)
		}
	}
	return nil
}

// TestMegatronCuts: the tensor-parallel plan of the shared bert_base (a
// torch.onnx export, with constant reshapes to heads and scalar
// constants between the products) is Megatron's: column cuts on q, k, v
// and f1, row cuts on o and f2 where the plan reduces. It used to get 72
// column cuts and no row cut. Eight devices would split bert_base's 12
// heads, so that plan gathers and DTensor cannot express it; an MLP of
// three layers ends on a column cut, whose shard DTensor would return.
func TestMegatronCuts(t *testing.T) {
	bert, err := onnx.ReadModel(testfiles.Shared(t, "models", "bert_base.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*onnx.Model{
		"bert_base": bert,
		"block":     training.Transformer(training.TransformerConfig{Layers: 2, Hidden: 64, Heads: 4, FFN: 256, Seq: 8}),
		"mlp":       training.MLP(training.MLPConfig{Layers: 4, Width: 64}),
		"mlp3":      training.MLP(training.MLPConfig{Layers: 3, Width: 64}),
	}
	for _, c := range []struct {
		model  string
		dp, tp int
		want   map[string]string
		err    error
	}{
		{"bert_base", 1, 2, megatron(12), nil},
		{"bert_base", 2, 2, megatron(12), nil},
		{"bert_base", 1, 4, megatron(12), nil},
		{"bert_base", 1, 8, nil, ErrNotTorch},
		{"block", 1, 4, megatron(2), nil},
		{"mlp", 1, 2, alternating(4), nil},
		{"mlp", 1, 3, nil, ErrCutsNothing},
		{"mlp3", 1, 2, nil, ErrNotTorch},
	} {
		g, err := training.FromONNX(models[c.model], c.model, 8)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := torchPlan(t, g, c.dp, c.tp)
		switch {
		case c.err != nil:
			if !errors.Is(err, c.err) {
				t.Errorf("%s dp%d×tp%d: %v, want %v", c.model, c.dp, c.tp, err, c.err)
			}
		case err != nil:
			t.Errorf("%s dp%d×tp%d: %v", c.model, c.dp, c.tp, err)
		default:
			if err := sameModules(tp.Modules, c.want); err != nil {
				t.Errorf("%s dp%d×tp%d: %v", c.model, c.dp, c.tp, err)
			}
		}
	}
}

// TestDegreeThatCutsNothing: a tensor-parallel degree dividing no weight
// product's features is not priced, so no label says tp3 where every
// operator is replicated (mlp on summit:4 was shown as dp8×tp3).
func TestDegreeThatCutsNothing(t *testing.T) {
	g, err := training.FromONNX(training.MLP(training.MLPConfig{Layers: 4, Width: 64}), "mlp", 12)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Choose(context.Background(), g, Kinds, Options{Machine: machine(3)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Results {
		if r.Strategy.TP == 3 && !errors.Is(r.Err, ErrCutsNothing) {
			t.Errorf("%s priced (%v); want ErrCutsNothing", r.Strategy, r.Err)
		}
	}
	if c.Chosen.Strategy.TP != 1 {
		t.Errorf("chose %s, whose tensor-parallel degree cuts nothing", c.Chosen.Strategy)
	}
}

// TestShardingAxes: the IR-11 annotations of bert_base's dp2×tp2 plan,
// read back from the written file by the onnx package
// (scripts/check_sharding.py --dump), say what the plan does: every
// operator's output cut by tensor parallelism on its layout's axis (and
// no other), the reshaped q, k and v on the heads axis, the scores and
// softmax on batch and heads, and no reduction axis cut.
func TestShardingAxes(t *testing.T) {
	needPython(t, "onnx, onnxruntime")
	path := testfiles.Shared(t, "models", "bert_base.onnx")
	m, err := onnx.ReadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := training.FromONNX(m, "bert_base", 8)
	if err != nil {
		t.Fatal(err)
	}
	s := Strategy{Kind: Grid, DP: 2, TP: 2, PP: 1, Microbatches: 1}
	r, err := Price(context.Background(), g, s, Options{Machine: machine(4)})
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	sharded, err := (&Choice{Model: "bert_base", Chosen: r}).Sharded(m, g)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bert.sharded.onnx")
	if err := onnx.WriteModel(out, sharded); err != nil {
		t.Fatal(err)
	}
	text, err := exec.Command("python3", "../scripts/check_sharding.py", out, "--dump").Output()
	if err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	var read map[string]map[string]map[string]int
	if err := json.Unmarshal(text, &read); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, op := range g.Ops {
		l := r.Layouts[i]
		v := op.Outputs[0]
		got := read[op.Name][v]
		wantTP := -1
		if l.sliced() {
			wantTP = l.Axis
		}
		if err := tpAxis(got, wantTP); err != nil {
			t.Errorf("%s (%s, %s) output %s: %v", op.Name, op.Type, l.Style, v, err)
		}
		if g.HasBatch(v) && got["0"] != 2 {
			t.Errorf("%s output %s: batch axis 0 has %d shards, want 2", op.Name, v, got["0"])
		}
		shape := g.ValueShape(v)
		switch {
		case op.Type == "Reshape" && len(shape) == 4:
			seen["heads"]++
			if got["2"] != 2 {
				t.Errorf("%s: reshaped heads %v cut %v, want axis 2 (heads) in 2", op.Name, shape, got)
			}
		case op.Type == "Softmax" || (op.Type == "MatMul" && op.Product == nil):
			seen["scores"]++
			if got["0"] != 2 || got["1"] != 2 || len(got) != 2 {
				t.Errorf("%s %v cut %v, want batch × heads (axes 0 and 1)", op.Name, shape, got)
			}
		}
		for _, in := range op.Inputs {
			if ax, ok := read[op.Name][in]; ok && reducesOver(op, in, g, ax) {
				t.Errorf("%s: input %s is cut on an axis the operator reduces over: %v", op.Name, in, ax)
			}
		}
	}
	if seen["heads"] != 36 || seen["scores"] != 36 {
		t.Errorf("checked %d reshapes to heads and %d scores or softmax; want 36 of each", seen["heads"], seen["scores"])
	}
}

// tpAxis checks that the only axis other than the batch cut in two by
// tensor parallelism is want (none when want is −1).
func tpAxis(got map[string]int, want int) error {
	for a, n := range got {
		axis, _ := strconv.Atoi(a)
		if axis != 0 && axis != want {
			return fmt.Errorf("axis %d cut in %d, want only axis %d", axis, n, want)
		}
	}
	if want > 0 && got[strconv.Itoa(want)] != 2 {
		return fmt.Errorf("axis %d not cut in 2: %v", want, got)
	}
	return nil
}

// reducesOver reports whether input v of op is cut on an axis op sums or
// normalizes over: a product of activations' contraction axis, a
// softmax's axis, the features a normalization or reduction reads.
func reducesOver(op training.Op, v string, g *training.Graph, cut map[string]int) bool {
	rank := len(g.ValueShape(v))
	var reduced []int
	switch {
	case op.Type == "MatMul" && op.Product == nil:
		reduced = []int{map[bool]int{true: rank - 1, false: rank - 2}[v == op.Inputs[0]]}
	case op.Type == "Softmax":
		reduced = op.Reduces
	case op.NeedsAllFeatures:
		reduced = []int{rank - 1}
	}
	for _, a := range reduced {
		if cut[strconv.Itoa(a)] > 1 && !(a == 0 && g.HasBatch(v)) {
			return true
		}
	}
	return false
}
