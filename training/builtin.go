package training

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"rulebook/onnx"
)

// Built-in workloads, Unity's (§6): structure only, like the shared
// models: weights are initializers with shapes and no data. Node and
// weight names follow torch.onnx's export of the equivalent PyTorch
// modules (scripts/torch_models.py), so plans name module paths PyTorch
// knows.

// MLPConfig is a stack of Layers Linear(Width, Width) with ReLU between.
type MLPConfig struct{ Layers, Width int64 }

// TransformerConfig is a post-LN encoder like the shared bert_base export:
// per layer q, k, v, o projections, f1/f2 feed-forward with GELU, ln1, ln2.
type TransformerConfig struct{ Layers, Hidden, Heads, FFN, Seq int64 }

// DLRMConfig is a small DLRM: a bottom MLP over dense features, embedding
// tables, concatenation as the interaction, and a top MLP.
type DLRMConfig struct {
	Dense        int64
	Bottom, Top  []int64
	Tables, Rows int64
	Dim          int64
}

// Unity's workloads at their published sizes.
var (
	UnityMLP  = MLPConfig{Layers: 16, Width: 8192}
	BERTLarge = TransformerConfig{Layers: 24, Hidden: 1024, Heads: 16, FFN: 4096, Seq: 512}
	SmallDLRM = DLRMConfig{Dense: 13, Bottom: []int64{512, 256, 64}, Top: []int64{512, 256, 1}, Tables: 8, Rows: 1_000_000, Dim: 64}
)

var builtins = map[string]func() *onnx.Model{
	"mlp":        func() *onnx.Model { return MLP(UnityMLP) },
	"bert-large": func() *onnx.Model { return Transformer(BERTLarge) },
	"dlrm":       func() *onnx.Model { return DLRM(SmallDLRM) },
}

// BuiltinNames lists the built-in workloads.
func BuiltinNames() []string {
	var names []string
	for n := range builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Builtin builds a workload by name.
func Builtin(name string) (*onnx.Model, error) {
	b, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("unknown model %q: not an .onnx file nor a built-in workload (%s)", name, strings.Join(BuiltinNames(), ", "))
	}
	return b(), nil
}

// builder accumulates one graph's nodes and weights.
type builder struct {
	g     onnx.Graph
	count map[string]int
}

func newBuilder(name string) *builder {
	return &builder{g: onnx.Graph{Name: name}, count: map[string]int{}}
}

func (b *builder) model() *onnx.Model {
	return &onnx.Model{IRVersion: 8, ProducerName: "rulebook", OpsetImports: []onnx.OperatorSetID{{Version: 17}}, Graph: &b.g}
}

// node adds an operator in module scope (a PyTorch module path, "" for
// the top level), named as torch.onnx names it: /scope/Op, /scope/Op_1, …
func (b *builder) node(scope, op string, inputs []string, attrs ...*onnx.Attribute) string {
	key := "/" + op
	if scope != "" {
		key = "/" + scopePath(scope) + key
	}
	name := key
	if n := b.count[key]; n > 0 {
		name += "_" + strconv.Itoa(n)
	}
	b.count[key]++
	out := name + "_output_0"
	b.g.Nodes = append(b.g.Nodes, &onnx.Node{Name: name, OpType: op, Inputs: inputs, Outputs: []string{out}, Attributes: attrs})
	return out
}

// scopePath writes a module path as torch.onnx's scope: "layers.0.q" is
// layers.0/q (a ModuleList item keeps its dotted name).
func scopePath(module string) string {
	parts := strings.Split(module, ".")
	var out []string
	for i := 0; i < len(parts); i++ {
		if i+1 < len(parts) && isIndex(parts[i+1]) {
			out = append(out, parts[i]+"."+parts[i+1])
			i++
			continue
		}
		out = append(out, parts[i])
	}
	return strings.Join(out, "/")
}

func isIndex(s string) bool { _, err := strconv.Atoi(s); return err == nil }

func (b *builder) weight(name string, dims ...int64) string {
	b.g.Initializers = append(b.g.Initializers, &onnx.Tensor{Name: name, Dims: dims, DataType: onnx.Float})
	return name
}

func (b *builder) ints(name string, v ...int64) string {
	b.g.Initializers = append(b.g.Initializers, &onnx.Tensor{Name: name, Dims: []int64{int64(len(v))}, DataType: onnx.Int64, Int64Data: v})
	return name
}

func (b *builder) input(name string, elem onnx.DataType, dims ...any) string {
	vi := &onnx.ValueInfo{Name: name, IsTensor: true, ElemType: elem, HasShape: true}
	for _, d := range dims {
		switch d := d.(type) {
		case string:
			vi.Shape = append(vi.Shape, onnx.Dim{Param: d})
		case int64:
			vi.Shape = append(vi.Shape, onnx.Dim{Value: d, HasValue: true})
		}
	}
	b.g.Inputs = append(b.g.Inputs, vi)
	return name
}

func (b *builder) output(v string, dims ...any) {
	b.input(v, onnx.Float, dims...)
	n := len(b.g.Inputs) - 1
	b.g.Outputs = append(b.g.Outputs, b.g.Inputs[n])
	b.g.Inputs = b.g.Inputs[:n]
}

func intAttr(name string, v int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: v}
}

func intsAttr(name string, v ...int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInts, Ints: v}
}

// linear is nn.Linear on a 2-D input: Gemm with the weight (out, in).
func (b *builder) linear(module, x string, in, out int64) string {
	w := b.weight(module+".weight", out, in)
	bias := b.weight(module+".bias", out)
	return b.node(module, "Gemm", []string{x, w, bias}, &onnx.Attribute{Name: "alpha", Type: onnx.AttrFloat, F: 1},
		&onnx.Attribute{Name: "beta", Type: onnx.AttrFloat, F: 1}, intAttr("transB", 1))
}

// linear3 is nn.Linear on a 3-D input: MatMul by the transposed weight
// (in, out), then Add of the bias, as torch.onnx exports it.
func (b *builder) linear3(module, x string, in, out int64) string {
	w := b.weight(module+".weight.T", in, out)
	bias := b.weight(module+".bias", out)
	y := b.node(module, "MatMul", []string{x, w})
	return b.node(module, "Add", []string{bias, y})
}

// MLP builds cfg's multi-layer perceptron on input [batch, width].
func MLP(cfg MLPConfig) *onnx.Model {
	b := newBuilder("mlp")
	x := b.input("input", onnx.Float, "batch", cfg.Width)
	for i := int64(0); i < cfg.Layers; i++ {
		x = b.linear(fmt.Sprintf("layers.%d", i), x, cfg.Width, cfg.Width)
		if i+1 < cfg.Layers {
			x = b.node("", "Relu", []string{x})
		}
	}
	b.output(x, "batch", cfg.Width)
	return b.model()
}

// Transformer builds cfg's encoder on hidden states [batch, seq, hidden].
func Transformer(cfg TransformerConfig) *onnx.Model {
	b := newBuilder("transformer")
	x := b.input("input", onnx.Float, "batch", cfg.Seq, cfg.Hidden)
	head := cfg.Hidden / cfg.Heads
	split := b.ints("heads_shape", 0, cfg.Seq, cfg.Heads, head)
	merge := b.ints("merge_shape", 0, cfg.Seq, cfg.Hidden)
	for i := int64(0); i < cfg.Layers; i++ {
		x = b.encoderLayer(fmt.Sprintf("layers.%d", i), x, cfg, split, merge)
	}
	b.output(x, "batch", cfg.Seq, cfg.Hidden)
	return b.model()
}

func (b *builder) encoderLayer(m, x string, cfg TransformerConfig, split, merge string) string {
	h := cfg.Hidden
	heads := func(p string, perm ...int64) string {
		r := b.node(m, "Reshape", []string{b.linear3(m+"."+p, x, h, h), split})
		return b.node(m, "Transpose", []string{r}, intsAttr("perm", perm...))
	}
	q, k, v := heads("q", 0, 2, 1, 3), heads("k", 0, 2, 3, 1), heads("v", 0, 2, 1, 3)
	scale := b.weight(m+".scale", 1)
	scores := b.node(m, "Div", []string{b.node(m, "MatMul", []string{q, k}), scale})
	probs := b.node(m, "Softmax", []string{scores}, intAttr("axis", -1))
	ctx := b.node(m, "Transpose", []string{b.node(m, "MatMul", []string{probs, v})}, intsAttr("perm", 0, 2, 1, 3))
	attn := b.linear3(m+".o", b.node(m, "Reshape", []string{ctx, merge}), h, h)
	x = b.layerNorm(m+".ln1", b.node(m, "Add", []string{x, attn}), h)
	f := b.gelu(m, b.linear3(m+".f1", x, h, cfg.FFN))
	f = b.linear3(m+".f2", f, cfg.FFN, h)
	return b.layerNorm(m+".ln2", b.node(m, "Add", []string{x, f}), h)
}

func (b *builder) layerNorm(m, x string, h int64) string {
	return b.node(m, "LayerNormalization", []string{x, b.weight(m+".weight", h), b.weight(m+".bias", h)}, intAttr("axis", -1))
}

// gelu is GELU as torch.onnx writes it at opset 17: x·(1 + erf(x/√2))/2.
func (b *builder) gelu(m, x string) string {
	root2 := b.weight(m+".sqrt2", 1)
	one := b.weight(m+".one", 1)
	half := b.weight(m+".half", 1)
	e := b.node(m, "Erf", []string{b.node(m, "Div", []string{x, root2})})
	return b.node(m, "Mul", []string{b.node(m, "Mul", []string{x, b.node(m, "Add", []string{e, one})}), half})
}

// DLRM builds cfg's recommendation model: dense features [batch, Dense]
// and one index per table [batch].
func DLRM(cfg DLRMConfig) *onnx.Model {
	b := newBuilder("dlrm")
	x := b.input("dense", onnx.Float, "batch", cfg.Dense)
	width := cfg.Dense
	for i, w := range cfg.Bottom {
		x = b.node("", "Relu", []string{b.linear(fmt.Sprintf("bot.%d", i), x, width, w)})
		width = w
	}
	parts := []string{x}
	for t := int64(0); t < cfg.Tables; t++ {
		idx := b.input(fmt.Sprintf("sparse_%d", t), onnx.Int64, "batch")
		table := b.weight(fmt.Sprintf("emb.%d.weight", t), cfg.Rows, cfg.Dim)
		parts = append(parts, b.node(fmt.Sprintf("emb.%d", t), "Gather", []string{table, idx}))
		width += cfg.Dim
	}
	x = b.node("", "Concat", parts, intAttr("axis", 1))
	for i, w := range cfg.Top {
		x = b.linear(fmt.Sprintf("top.%d", i), x, width, w)
		if i+1 < len(cfg.Top) {
			x = b.node("", "Relu", []string{x})
		}
		width = w
	}
	x = b.node("", "Sigmoid", []string{x})
	b.output(x, "batch", int64(1))
	return b.model()
}
