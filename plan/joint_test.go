package plan

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"rulebook/cluster"
	"rulebook/internal/testfiles"
	"rulebook/onnx"
	"rulebook/rules"
	"rulebook/training"
	"rulebook/version"
)

// parallelVersion is a released parallel version, exported as a bundle by
// 'rulebook build --ops parallel --degrees 2,3 --max-ops 3' then
// 'rulebook export --version v1 --format json'.
func parallelVersion(t *testing.T) *Substitutions {
	t.Helper()
	v, err := version.LoadBundle("testdata/parallel-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSubstitutions(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJointFindsMegatron: searched on the BERT-Large-sized transformer at
// tensor degrees 2 and 4, the joint layouts are Megatron's: Q, K, V and
// the first MLP product cut by output columns, the attention's output and
// the second MLP product by input rows, and so one forward all-reduce per
// attention block and one per MLP block. Each product's layout cites the
// version's rule, and so does the attention's heads cut.
func TestJointFindsMegatron(t *testing.T) {
	m, _ := training.Builtin("bert-large")
	g, err := training.FromONNX(m, "bert-large", 8)
	if err != nil {
		t.Fatal(err)
	}
	subs := parallelVersion(t)
	want := map[string]Style{"q": Colwise, "k": Colwise, "v": Colwise, "o": Rowwise, "f1": Colwise, "f2": Rowwise}
	for _, tp := range []int{2, 4} {
		o := Options{Machine: machine(tp), Precision: cluster.FP32, Substitutions: subs}
		r, err := Price(context.Background(), g, Strategy{Kind: Joint, DP: 1, TP: tp, PP: 1, Microbatches: 1}, o)
		if err != nil || r.Err != nil {
			t.Fatalf("tp%d: %v %v", tp, err, r.Err)
		}
		reduces := map[string]int{}
		for i, l := range r.Layouts {
			op := g.Ops[i]
			if op.Product == nil || op.ParamBytes == 0 {
				if l.ForwardAllReduce {
					t.Errorf("tp%d: %s all-reduces its output", tp, op.Name)
				}
				continue
			}
			last := op.Module[strings.LastIndex(op.Module, ".")+1:]
			if l.Style != want[last] || l.GatherInputs {
				t.Errorf("tp%d: %s is %s (gather %v), want %s", tp, op.Name, l.Style, l.GatherInputs, want[last])
			}
			if l.ForwardAllReduce {
				reduces[op.Module[:strings.LastIndex(op.Module, ".")]]++
			}
		}
		if len(reduces) != 24 {
			t.Errorf("tp%d: forward all-reduces in %d layers, want 24", tp, len(reduces))
		}
		for layer, n := range reduces {
			if n != 2 {
				t.Errorf("tp%d: %s has %d forward all-reduces, want 2 (attention, MLP)", tp, layer, n)
			}
		}
		c := subs.cite(g, r)
		if len(c.Applied) < 2 || c.Applied[0].Rule != subs.Column.Rule || c.Applied[0].Operators != 96 || c.Applied[1].Operators != 48 {
			t.Errorf("tp%d: citations %+v", tp, c.Applied)
		}
		// Each layer's attention: the scores' product and the softmax cite
		// the weights' heads cut, the product by V the output's; the scale
		// between them is element-wise.
		heads := map[string]int{}
		for _, a := range c.Applied {
			heads[a.Rule] = a.Operators
		}
		if heads[subs.AttnSoftmax.Rule] != 48 || heads[subs.AttnMix.Rule] != 24 || c.Unproved["MatMul"]+c.Unproved["Softmax"] != 0 {
			t.Errorf("tp%d: attention cites %d and %d operators, want 48 and 24; unproved %v", tp, heads[subs.AttnSoftmax.Rule], heads[subs.AttnMix.Rule], c.Unproved)
		}
	}
}

// TestJointNeverAboveGrid: for each data × tensor factorisation the joint
// family's simulated step is at most the grid's, on a transformer, the
// MLP and a CNN.
func TestJointNeverAboveGrid(t *testing.T) {
	subs := parallelVersion(t)
	for _, c := range []struct {
		model string
		batch int64
	}{{"bert-large", 24}, {"mlp", 384}, {"dlrm", 384}} {
		m, _ := training.Builtin(c.model)
		g, err := training.FromONNX(m, c.model, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Machine: machine(6), Substitutions: subs}
		for _, s := range candidates(Grid, 6, 6, 0) {
			grid, err := Price(context.Background(), g, s, o)
			if err != nil {
				t.Fatal(err)
			}
			s.Kind = Joint
			joint, err := Price(context.Background(), g, s, o)
			if err != nil {
				t.Fatal(err)
			}
			if grid.Err == nil && (joint.Err != nil || joint.Time.Step > grid.Time.Step) {
				t.Errorf("%s %s: joint %v (%v), grid %v", c.model, layoutText(s), joint.Time.Step, joint.Err, grid.Time.Step)
			}
		}
	}
}

// TestJointNeedsParallelRules: without a pinned version the joint family
// is not searched and the table says why; asked for alone it is refused;
// a version without the column cut's rule gets no column cut.
func TestJointNeedsParallelRules(t *testing.T) {
	g := smallEncoder(t)
	o := Options{Machine: machine(2)}
	if _, err := Choose(context.Background(), g, []Kind{Joint}, o); err == nil || !strings.Contains(err.Error(), "--rules") {
		t.Errorf("joint alone without rules: %v", err)
	}
	c, err := Choose(context.Background(), g, Kinds, o)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := c.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "joint: not searched") {
		t.Errorf("the table does not say why joint was not searched:\n%s", table.String())
	}
	subs := parallelVersion(t)
	subs.Column = nil
	o.Substitutions = subs
	r, err := Price(context.Background(), g, Strategy{Kind: Joint, DP: 1, TP: 2, PP: 1, Microbatches: 1}, o)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range r.Layouts {
		if l.Style == Colwise {
			t.Errorf("%s is cut by columns, which the version does not prove", g.Ops[i].Name)
		}
	}
}

// TestJointRulesAreTheRegistrys: the rules the search looks for parse
// with the registry and each appears in the shipped bundle as released.
func TestJointRulesAreTheRegistrys(t *testing.T) {
	subs := parallelVersion(t)
	found := []*AppliedRule{subs.Batch, subs.Column, subs.Row, subs.Follow[rules.NameRelu], subs.Follow[rules.NameEwadd], subs.AttnSoftmax, subs.AttnMix, subs.LookupBatch}
	for i, a := range found {
		if a == nil {
			t.Errorf("rule %d of the search is not in the version", i)
			continue
		}
		if _, err := rules.ParseRule(rules.All(), a.Rule); err != nil {
			t.Errorf("%s: %v", a.Rule, err)
		}
	}
}

// TestJointCutsProvedConvolutions: on inception_v3, the version's
// convolution rules are written at stride 1 and same padding, so the
// joint search cuts output channels only of the convolutions at those
// parameters, cites the rule for each, and counts the strided or unpadded
// convolutions' data parallelism as unproved.
func TestJointCutsProvedConvolutions(t *testing.T) {
	subs := parallelVersion(t)
	ours := rules.ConvAttrs{Stride: 1, Padding: rules.PadSame, Activation: rules.ActNone, Groups: 1}
	if subs.ConvBatch[ours] == nil || subs.ConvChannel[ours] == nil {
		t.Fatalf("the bundle lacks the convolution's cuts at %+v: %v %v", ours, subs.ConvBatch[ours], subs.ConvChannel[ours])
	}
	m, err := onnx.ReadModel(testfiles.Shared(t, "models", "inception_v3.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := training.FromONNX(m, "inception_v3", 48)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Machine: machine(6), Substitutions: subs}
	r, err := Price(context.Background(), g, Strategy{Kind: Joint, DP: 2, TP: 3, PP: 1, Microbatches: 1}, o)
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	cut, other := 0, 0
	for i, l := range r.Layouts {
		op := g.Ops[i]
		if op.Product == nil || op.Product.Linear {
			continue
		}
		if op.Product.Conv == nil || *op.Product.Conv != ours {
			other++
			if l.Style == Colwise {
				t.Errorf("%s (%+v) is cut by channels, which the version does not prove", op.Name, op.Product.Conv)
			}
		} else if l.Style == Colwise {
			cut++
		}
	}
	if cut == 0 || other == 0 {
		t.Fatalf("%d convolutions cut by channels, %d at other parameters: want some of each", cut, other)
	}
	c := subs.cite(g, r)
	counted := map[string]int{}
	for _, a := range c.Applied {
		counted[a.Hash] = a.Operators
	}
	if counted[subs.ConvChannel[ours].Hash] != cut {
		t.Errorf("the channel cut's rule is cited for %d operators, want %d", counted[subs.ConvChannel[ours].Hash], cut)
	}
	if c.Unproved["Conv (rows cut)"] == 0 || counted[subs.ConvBatch[ours].Hash] == 0 {
		t.Errorf("data parallelism: %d convolutions cite the batch rule, %d are unproved; want both", counted[subs.ConvBatch[ours].Hash], c.Unproved["Conv (rows cut)"])
	}
}

// TestJointCitesLookups: DLRM's data-parallel lookups (indices of rank
// 1 into tables of 64 columns) cite the version's lookup batch cut, one
// per table.
func TestJointCitesLookups(t *testing.T) {
	subs := parallelVersion(t)
	if subs.LookupBatch == nil {
		t.Fatal("the bundle lacks the lookup's batch cut")
	}
	m, _ := training.Builtin("dlrm")
	g, err := training.FromONNX(m, "dlrm", 64)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Price(context.Background(), g, Strategy{Kind: Joint, DP: 4, TP: 1, PP: 1, Microbatches: 1}, Options{Machine: machine(4), Substitutions: subs})
	if err != nil || r.Err != nil {
		t.Fatal(err, r.Err)
	}
	c := subs.cite(g, r)
	tables := 0
	for _, op := range g.Ops {
		if op.Lookup {
			tables++
		}
	}
	for _, a := range c.Applied {
		if a.Rule == subs.LookupBatch.Rule && a.Operators == tables && tables > 0 {
			return
		}
	}
	t.Errorf("%d lookups; citations %+v, unproved %v", tables, c.Applied, c.Unproved)
}

// TestJointCitesBatchNorm: a training export's batch normalisation cut by
// channels cites the version's channel rule; cut by batch over
// data-parallel replicas, or by its image, it is reported as another
// function than one device computes, which no rule can prove.
func TestJointCitesBatchNorm(t *testing.T) {
	subs := parallelVersion(t)
	if subs.BatchNormChannel == nil {
		t.Fatal("the bundle lacks batch normalisation's channel cut")
	}
	vec := func(name string) *onnx.Tensor {
		return &onnx.Tensor{Name: name, Dims: []int64{4}, DataType: onnx.Float, FloatData: []float32{1, 2, 3, 4}}
	}
	w := &onnx.Tensor{Name: "w", Dims: []int64{4, 3, 3, 3}, DataType: onnx.Float, FloatData: make([]float32, 108)}
	m := badModel(&onnx.Node{OpType: "Conv", Inputs: []string{"x", "w"}, Attributes: []*onnx.Attribute{ints("pads", 1, 1, 1, 1)}}, w, vec("scale"), vec("bias"), vec("mean"), vec("var"))
	m.Graph.Nodes[0].Outputs = []string{"c"}
	m.Graph.Nodes = append(m.Graph.Nodes, &onnx.Node{Name: "bn", OpType: "BatchNormalization",
		Inputs: []string{"c", "scale", "bias", "mean", "var"}, Outputs: []string{"y"}})
	g, err := training.FromONNX(m, "cnn", 8)
	if err != nil {
		t.Fatal(err)
	}
	bn := slices.IndexFunc(g.Ops, func(op training.Op) bool { return op.Type == batchNormType })
	if bn < 0 {
		t.Fatalf("no batch normalisation among %d operators", len(g.Ops))
	}
	layouts := func(axis int) []OpLayout {
		ls := make([]OpLayout, len(g.Ops))
		ls[bn] = OpLayout{Style: Sharded, Axis: axis}
		return ls
	}
	channels := subs.cite(g, &Result{Strategy: Strategy{Kind: Joint, DP: 1, TP: 2, PP: 1}, Layouts: layouts(1)})
	if len(channels.Applied) != 1 || channels.Applied[0].Rule != subs.BatchNormChannel.Rule || len(channels.Changed) != 0 {
		t.Errorf("channels cut: applied %+v, changed %v", channels.Applied, channels.Changed)
	}
	batch := subs.cite(g, &Result{Strategy: Strategy{Kind: Joint, DP: 2, TP: 1, PP: 1}, Layouts: make([]OpLayout, len(g.Ops))})
	if batch.Changed[ghostBatchNorm] != 1 {
		t.Errorf("data parallel: changed %v, want %q", batch.Changed, ghostBatchNorm)
	}
	image := subs.cite(g, &Result{Strategy: Strategy{Kind: Joint, DP: 1, TP: 2, PP: 1}, Layouts: layouts(2)})
	if len(image.Changed) != 1 {
		t.Errorf("image rows cut: changed %v", image.Changed)
	}
	var out strings.Builder
	if err := batch.Write(&out); err != nil || !strings.Contains(out.String(), "not the one-device function") {
		t.Errorf("written: %v\n%s", err, out.String())
	}
}
