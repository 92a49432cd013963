package plan

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/onnx"
	"rulebook/simulate"
	"rulebook/training"

	"rulebook/internal/testfiles"
)

func smallEncoder(t *testing.T) *training.Graph {
	t.Helper()
	g, err := training.FromONNX(training.Transformer(training.TransformerConfig{Layers: 2, Hidden: 64, Heads: 4, FFN: 256, Seq: 8}), "block", 8)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestMegatronLayout: tensor parallelism cuts q, k, v and f1 by columns
// and o and f2 by rows, with one all-reduce after each row cut forward and
// each column cut backward; layer norms and residual adds stay whole.
func TestMegatronLayout(t *testing.T) {
	g := smallEncoder(t)
	want := map[string]Style{"q": Colwise, "k": Colwise, "v": Colwise, "o": Rowwise, "f1": Colwise, "f2": Rowwise}
	for i, l := range assignTensorParallel(g, 2) {
		op := g.Ops[i]
		last := op.Module[strings.LastIndex(op.Module, ".")+1:]
		switch {
		case op.Product != nil:
			if l.Style != want[last] || l.ForwardAllReduce != (l.Style == Rowwise) || l.BackwardAllReduce != (l.Style == Colwise) {
				t.Errorf("%s: %+v, want %s", op.Name, l, want[last])
			}
		case op.Type == "LayerNormalization" || op.Name == "/layers.0/Add":
			if l.Style != Replicated || l.GatherInputs {
				t.Errorf("%s: %+v, want replicated without a gather", op.Name, l)
			}
		case op.Type == "Softmax" || op.Type == "Erf":
			if l.Style != Sharded {
				t.Errorf("%s: %+v, want sharded", op.Name, l)
			}
		}
	}
}

// TestStrategies: every family is priced on summit:1 and the chosen plan
// fits; compute, exposed communication and idle add up to the step; the
// trace is valid and says it is simulated.
func TestStrategies(t *testing.T) {
	g, err := training.FromONNX(training.MLP(training.MLPConfig{Layers: 8, Width: 1536}), "mlp", 48)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Choose(context.Background(), g, Kinds, Options{Machine: machine(6)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Results) != 4 || !c.Fits {
		t.Fatalf("%d families priced, fits %v", len(c.Results), c.Fits)
	}
	for _, r := range c.Results {
		tm := r.Time
		if r.Err != nil || tm.Step <= 0 || math.Abs(tm.Compute+tm.ExposedCommunication+tm.Idle-tm.Step) > 1e-9*tm.Step {
			t.Errorf("%s: %+v, %v", r.Strategy, tm, r.Err)
		}
		if r.Strategy.Devices() != 6 {
			t.Errorf("%s uses %d devices of 6", r.Strategy, r.Strategy.Devices())
		}
	}
	if dp := c.Results[0]; dp.Time.ExposedCommunication <= 0 {
		t.Errorf("data parallel exposes no gradient all-reduce: %+v", dp.Time)
	}
	var table, trace bytes.Buffer
	if err := c.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "simulated") || !strings.Contains(table.String(), "α–β collectives") {
		t.Errorf("the table does not say its times are simulated by which model:\n%s", table.String())
	}
	if err := simulate.WriteChromeTrace(&trace, c.Chosen.Schedule, "mlp"); err != nil {
		t.Fatal(err)
	}
	if err := simulate.CheckTrace(trace.Bytes()); err != nil {
		t.Error(err)
	}
}

// TestMemoryLimit: BERT-Large on summit:1 with less memory per device
// than plain data parallelism needs. Priced alone, data parallel fits
// through a lever its label names; beside the grid, which fits without
// one and is faster than data parallel without levers, data parallel is
// not relieved. At 1 GiB only ZeRO-3 with recomputation fits; at 100 MiB
// nothing does, and the table says so.
func TestMemoryLimit(t *testing.T) {
	m, _ := training.Builtin("bert-large")
	g, err := training.FromONNX(m, "bert-large", 6)
	if err != nil {
		t.Fatal(err)
	}
	both := []Kind{DataParallel, Grid}
	for _, c := range []struct {
		kinds  []Kind
		limit  float64
		fits   bool
		dp     string // data parallel's layout label
		chosen string
	}{
		{[]Kind{DataParallel}, 5 << 30, true, "dp6×tp1+zero1", "chosen: dp dp6×tp1+zero1,"},
		{both, 5 << 30, true, "dp6×tp1", "chosen: grid dp3×tp2,"},
		{both, 1 << 30, true, "dp6×tp1+zero3+recompute", "chosen: grid dp3×tp2+zero3+recompute"},
		{both, 100 << 20, false, "", "no strategy fits in 0.10 GiB per device"},
	} {
		c2, err := Choose(context.Background(), g, c.kinds, Options{Machine: machine(6), MemoryLimit: c.limit, Precision: cluster.FP32})
		if err != nil {
			t.Fatal(err)
		}
		var table bytes.Buffer
		c2.WriteTable(&table)
		dp := c2.Results[0]
		if c2.Fits != c.fits || (c.fits && layoutText(dp.Strategy) != c.dp) || !strings.Contains(table.String(), c.chosen) {
			t.Errorf("limit %.2f GiB: fits %v, dp %s; want %v, %s, %q\n%s", c.limit/(1<<30), c2.Fits, layoutText(dp.Strategy), c.fits, c.dp, c.chosen, table.String())
		}
	}
}

// TestBadInput: one clear line for each mistake, and nothing written.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.json")
	os.WriteFile(zero, []byte(`{"nodes":1,"devices_per_node":0,"device":{"peak_flops":1,"memory_bandwidth":1,"memory_bytes":1},"intra_node":{"bandwidth":1},"inter_node":{"bandwidth":1}}`), 0o644)
	out := filepath.Join(dir, "plan.json")
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{Model: "mlp", Machine: zero, Batch: 8}, "zero.json: devices_per_node is 0; want 1 to 65536"},
		{Request{Model: testfiles.Shared(t, "models", "resnet50.onnx"), Machine: "summit:1"}, "resnet50: no batch dimension (input input has fixed shape [1 3 224 224]); pass --batch N"},
		{Request{Model: "mlp", Machine: "tpu:4", Batch: 8}, `unknown machine preset "tpu"`},
		{Request{Model: "mlp", Machine: "summit:1", Batch: 10, Strategy: "dp"}, "batch 10 does not divide by the data-parallel degree 6"},
		{Request{Model: "mlp", Machine: "summit:1", Batch: 1024}, "no strategy can run this step: dp (dp6×tp1): batch 1024 does not divide by the data-parallel degree 6; tp (dp1×tp6): no weight product's features divide by 6"},
		{Request{Model: "gpt", Machine: "summit:1", Batch: 8}, `unknown model "gpt"`},
		{Request{Model: "mlp", Machine: "summit:1", Batch: 12, Strategy: "zigzag"}, `unknown strategy "zigzag"`},
	} {
		c.req.Out = out
		_, err := Run(context.Background(), c.req)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c.req, err, c.want)
		}
		if entries, _ := filepath.Glob(filepath.Join(dir, "plan*")); len(entries) > 0 {
			t.Errorf("%+v wrote %v", c.req, entries)
		}
	}
}

// TestShardedAnnotations: the sharded export cuts a column-parallel
// weight on its output axis over the tensor-parallel devices, each piece
// replicated over the data-parallel ones through a device group.
func TestShardedAnnotations(t *testing.T) {
	g := smallEncoder(t)
	s := Strategy{Kind: Grid, DP: 2, TP: 2, PP: 1, Microbatches: 1}
	r, err := Price(context.Background(), g, s, Options{Machine: machine(4)})
	if err != nil {
		t.Fatal(err)
	}
	model := training.Transformer(training.TransformerConfig{Layers: 2, Hidden: 64, Heads: 4, FFN: 256, Seq: 8})
	sharded, err := (&Choice{Chosen: r}).Sharded(model, g)
	if err != nil {
		t.Fatal(err)
	}
	if sharded.IRVersion != ShardingIRVersion || sharded.Configurations[0].NumDevices != 4 || model.Configurations != nil {
		t.Fatalf("IR %d, configurations %+v (the input model must stay unannotated)", sharded.IRVersion, sharded.Configurations)
	}
	var q *onnx.Node
	for _, n := range sharded.Graph.Nodes {
		if n.Name == "/layers.0/q/MatMul" {
			q = n
		}
	}
	for _, spec := range q.DeviceConfigurations[0].Shardings {
		if spec.TensorName != "layers.0.q.weight.T" {
			continue
		}
		d := spec.ShardedDims
		if len(d) != 1 || d[0].Axis != 1 || d[0].NumShards != 2 || len(spec.DeviceGroups) != 2 ||
			!equal(spec.DeviceGroups[0].Devices, []int64{0, 2}) || !equal(spec.DeviceGroups[1].Devices, []int64{1, 3}) {
			t.Errorf("q's weight: %+v", spec)
		}
		return
	}
	t.Error("q's weight has no sharding spec")
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTorchPlanLayers: a torch plan names the depth of the model's layers
// list, so that the bridge builds a model with every module it cuts.
func TestTorchPlanLayers(t *testing.T) {
	g, err := training.FromONNX(training.MLP(training.UnityMLP), "mlp", 8)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Price(context.Background(), g, Strategy{Kind: TensorParallel, DP: 1, TP: 2, PP: 1, Microbatches: 1}, Options{Machine: machine(2)})
	if err != nil {
		t.Fatal(err)
	}
	tp, err := (&Choice{Model: "mlp", Chosen: r}).Torch(g)
	if err != nil || tp.Layers != 16 || tp.Modules["layers.15"] == "" {
		t.Errorf("layers %d, modules %v, %v; want 16 layers", tp.Layers, tp.Modules, err)
	}
}

// TestPartOfANode plans on fewer devices than a node has (h100:1x2): every
// priced strategy uses exactly those two devices, and one device alone
// leaves nothing to split.
func TestPartOfANode(t *testing.T) {
	for _, c := range []struct {
		machine string
		devices int
	}{{"h100:1x2", 2}, {"h100:1x1", 1}, {"dgx-a100:2x2", 4}} {
		out, err := Run(context.Background(), Request{Model: "mlp", Machine: c.machine, Batch: 64})
		if err != nil {
			t.Fatalf("%s: %v", c.machine, err)
		}
		if got := out.Choice.Machine.NumDevices(); got != c.devices {
			t.Errorf("%s: %d devices, want %d", c.machine, got, c.devices)
		}
		for _, r := range out.Choice.Results {
			if s := r.Strategy; r.Err == nil && s.DP*s.TP*max(s.PP, 1) != c.devices {
				t.Errorf("%s: %s uses dp%d×tp%d×pp%d, not the %d devices", c.machine, s.Kind, s.DP, s.TP, s.PP, c.devices)
			}
		}
	}
}

// TestAttentionMode: fused attention (the default) keeps less for
// backward than the graph as written and moves fewer bytes, and plan.json
// says which was priced.
func TestAttentionMode(t *testing.T) {
	m, _ := training.Builtin("bert-large")
	g, err := training.FromONNX(m, "bert-large", 8)
	if err != nil {
		t.Fatal(err)
	}
	s := Strategy{Kind: DataParallel, DP: 1, TP: 1, PP: 1, Microbatches: 1}
	var rs []*Result
	for _, a := range []Attention{"", UnfusedAttention} {
		r, err := Price(context.Background(), g, s, Options{Machine: machine(1), Attention: a})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	fused, unfused := rs[0], rs[1]
	if fused.Memory.Activations >= unfused.Memory.Activations || fused.Time.Step >= unfused.Time.Step || fused.Memory.Weights != unfused.Memory.Weights {
		t.Errorf("fused %+v %+v; unfused %+v %+v", fused.Memory, fused.Time, unfused.Memory, unfused.Time)
	}
	c := &Choice{Model: "bert-large", Chosen: fused, Options: Options{Machine: machine(1)}}
	if f := c.NewFile(g); f.Attention != FusedAttention {
		t.Errorf("plan.json attention %q", f.Attention)
	}
	if _, err := Price(context.Background(), g, s, Options{Machine: machine(1), Attention: "flash"}); err == nil {
		t.Error("attention flash was accepted")
	}
}

// TestLevers: each memory lever's effect on BERT-Large's memory and
// simulated step, against plain data parallelism on six V100s at batch 24,
// in fp32 (where compute, not the exposed all-reduce, sets the step).
func TestLevers(t *testing.T) {
	m, _ := training.Builtin("bert-large")
	g, err := training.FromONNX(m, "bert-large", 24)
	if err != nil {
		t.Fatal(err)
	}
	price := func(s Strategy) *Result {
		s.Kind, s.DP, s.TP, s.PP = DataParallel, 6, 1, 1
		if s.Microbatches == 0 {
			s.Microbatches = 1
		}
		r, err := Price(context.Background(), g, s, Options{Machine: machine(6), Precision: cluster.FP32})
		if err != nil || r.Err != nil {
			t.Fatalf("%s: %v %v", s, err, r.Err)
		}
		return r
	}
	base := price(Strategy{})
	bm, bt := base.Memory, base.Time
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
	for _, c := range []struct {
		s    Strategy
		want func(m Memory, t Time) bool
	}{
		// ZeRO-1: Adam's state sharded six ways; the update's weights are
		// gathered after the step
		{Strategy{ZeRO: 1}, func(m Memory, t Time) bool {
			return near(m.Optimizer, bm.Optimizer/6) && m.Gradients == bm.Gradients && m.Weights == bm.Weights && t.Step > bt.Step
		}},
		// ZeRO-2: the gradients as well
		{Strategy{ZeRO: 2}, func(m Memory, t Time) bool {
			return near(m.Gradients, bm.Gradients/6) && near(m.Optimizer, bm.Optimizer/6) && m.Weights == bm.Weights
		}},
		// ZeRO-3: the weights too, but for one layer gathered at a time;
		// the gathers before each forward and backward cost time
		{Strategy{ZeRO: 3}, func(m Memory, t Time) bool {
			return m.Weights < bm.Weights/4 && m.Weights > bm.Weights/6 && t.ExposedCommunication > bt.ExposedCommunication
		}},
		// recomputation: only each layer's input kept, one layer's tensors
		// back at a time; about a third more compute
		{Strategy{Recompute: true}, func(m Memory, t Time) bool {
			return m.Activations < bm.Activations/8 && t.Compute > 1.25*bt.Compute && t.Compute < 1.4*bt.Compute
		}},
		// accumulation over 4 steps: a quarter of the activations, about
		// the same compute
		{Strategy{Microbatches: 4}, func(m Memory, t Time) bool {
			return near(m.Activations, bm.Activations/4) && m.Weights == bm.Weights && math.Abs(t.Compute-bt.Compute) < 0.01*bt.Compute
		}},
	} {
		r := price(c.s)
		if !c.want(r.Memory, r.Time) {
			t.Errorf("%s: memory %+v time %+v; plain %+v %+v", layoutText(r.Strategy), r.Memory, r.Time, bm, bt)
		}
	}
}

// TestLeverChosen: BERT-Large at batch 96 on summit:1 fits (it did not
// before saved activations were counted once), and a strategy that needs
// a lever to fit names it in its label.
func TestLeverChosen(t *testing.T) {
	out, err := Run(context.Background(), Request{Model: "bert-large", Machine: "summit:1", Batch: 96})
	if err != nil {
		t.Fatal(err)
	}
	c := out.Choice
	if !c.Fits || !c.Chosen.Fits {
		t.Fatalf("bert-large at batch 96 on summit:1 does not fit: %s", c.Chosen.Strategy)
	}
	for _, r := range c.Results {
		plain := r.Strategy
		plain.ZeRO, plain.Recompute = 0, false
		if plain.PP == 1 {
			plain.Microbatches = 1
		}
		if plain == r.Strategy {
			continue
		}
		p, err := Price(context.Background(), out.Graph, plain, c.Options)
		if err != nil || p.Fits || r.Strategy.levers() == "" {
			t.Errorf("%s uses a lever, though %s fits: %v, or its label names none", layoutText(r.Strategy), layoutText(plain), err)
		}
	}
	var table bytes.Buffer
	c.WriteTable(&table)
	t.Log(table.String())
}

// TestLeverOptions: BERT-Large at batch 96 on summit:1 in fp32 needs a
// lever on data parallelism; the choice says, for each lever family
// alone, its fastest plan that fits (each with its lever in its label),
// in the table and in plan.json; and --levers restricts the search to the
// families named.
func TestLeverOptions(t *testing.T) {
	req := Request{Model: "bert-large", Machine: "summit:1", Batch: 96, Precision: "fp32", Strategy: "dp"}
	for _, c := range []struct {
		levers   string
		label    string // the chosen layout's levers
		families []string
	}{
		{"", "+accum2", []string{"gradient accumulation", "ZeRO 1-3", "recomputation"}},
		{"recompute", "+recompute", []string{"recomputation"}},
		{"zero", "+zero1", []string{"ZeRO 1-3"}},
		{"zero,recompute", "+zero1", []string{"ZeRO 1-3", "recomputation"}},
	} {
		r := req
		r.Levers = c.levers
		r.Out = filepath.Join(t.TempDir(), "p.json")
		out, err := Run(context.Background(), r)
		if err != nil {
			t.Fatalf("--levers %q: %v", c.levers, err)
		}
		ch := out.Choice
		if !ch.Fits || ch.Chosen.Strategy.levers() != c.label {
			t.Errorf("--levers %q: chose %s (fits %v), want levers %s", c.levers, layoutText(ch.Chosen.Strategy), ch.Fits, c.label)
		}
		var families []string
		for _, l := range ch.LeverOptions {
			families = append(families, l.Family)
			if l.Result == nil || !l.Result.Fits || l.Result.Strategy.levers() == "" || l.Time.Step <= 0 {
				t.Errorf("--levers %q: %s: %+v", c.levers, l.Family, l)
			}
		}
		if strings.Join(families, ", ") != strings.Join(c.families, ", ") {
			t.Errorf("--levers %q: families %v, want %v", c.levers, families, c.families)
		}
		var table bytes.Buffer
		if err := ch.WriteTable(&table); err != nil || !strings.Contains(table.String(), "each lever alone on dp6×tp1 (simulated):") {
			t.Errorf("--levers %q: %v\n%s", c.levers, err, table.String())
		}
		data, err := os.ReadFile(r.Out)
		if err != nil || !strings.Contains(string(data), `"lever_options"`) {
			t.Errorf("--levers %q: plan.json has no lever_options: %v", c.levers, err)
		}
	}
	_, err := Run(context.Background(), Request{Model: "bert-large", Machine: "summit:1", Batch: 96, Levers: "recompute,offload"})
	if !errors.Is(err, ErrUnknownLever) {
		t.Errorf("--levers recompute,offload: %v; want ErrUnknownLever", err)
	}
}
