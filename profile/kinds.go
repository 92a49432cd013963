package profile

import (
	"fmt"

	"rulebook/rules"
	"strconv"
	"strings"
)

// Kind is a measured operator, as the profile's op column names it.
type Kind string

// The operators a profile measures. Those the rule registry also has
// carry its names (rules.NameLinear: a product by a weight), which are
// the profile's column values too.
const (
	Linear           Kind = rules.NameLinear    // F.linear, weight [N, K]
	AttentionFused   Kind = "attention_fused"   // F.scaled_dot_product_attention
	AttentionUnfused Kind = "attention_unfused" // softmax(q·kᵀ/√d)·v, scores kept
	LayerNorm        Kind = "layernorm"
	GELU             Kind = "gelu"
	ReLU             Kind = rules.NameRelu
	Softmax          Kind = "softmax" // over the last axis
	Add              Kind = "add"
	Conv2D           Kind = rules.NameConv2D // NCHW, no bias
	AdamForeach      Kind = "adam_foreach"   // torch.optim.Adam, foreach
	AdamFused        Kind = "adam_fused"     // torch.optim.Adam, fused
)

// kinds gives each operator its shape's spelling: # is a positive integer.
var kinds = []struct {
	kind   Kind
	shape  string
	fields string
}{
	{Linear, "#x#->#", "tokens x in -> out, e.g. 512x1024->4096"},
	{AttentionFused, "b#h#s#d#", "batch, heads, sequence, head size, e.g. b8h16s512d64"},
	{AttentionUnfused, "b#h#s#d#", "batch, heads, sequence, head size, e.g. b8h16s512d64"},
	{LayerNorm, "#x#", "rows x features, e.g. 4096x1024"},
	{GELU, "#x#", "rows x features, e.g. 4096x1024"},
	{ReLU, "#x#", "rows x features, e.g. 4096x1024"},
	{Softmax, "#x#", "rows x features, e.g. 4096x1024"},
	{Add, "#x#", "rows x features, e.g. 4096x1024"},
	{Conv2D, "x#x#x#x#_w#x#x#x#_s#", "input NCHW, weight OIHW and stride, e.g. x32x64x56x56_w64x64x3x3_s1"},
	{AdamForeach, "# params", "parameters updated, e.g. 100000000 params"},
	{AdamFused, "# params", "parameters updated, e.g. 100000000 params"},
}

// ParseKind reads an operator's name.
func ParseKind(s string) (Kind, error) {
	for _, k := range kinds {
		if string(k.kind) == s {
			return k.kind, nil
		}
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k.kind)
	}
	return "", fmt.Errorf("unknown operator %q (known: %s)", s, strings.Join(names, ", "))
}

func (k Kind) template() (shape, fields string) {
	for _, d := range kinds {
		if d.kind == k {
			return d.shape, d.fields
		}
	}
	return "", ""
}

// Shape is a measured operator's size: the integers of its kind's
// spelling, in order.
type Shape struct {
	kind Kind
	Dims []int64
}

// maxDim bounds one dimension: past it, sizes overflow when multiplied.
const maxDim = 1 << 40

// ParseShape reads a shape as kind k spells it.
func ParseShape(k Kind, s string) (Shape, error) {
	tmpl, fields := k.template()
	sh := Shape{kind: k}
	rest := s
	for _, part := range strings.SplitAfter(tmpl, "#") {
		lit, hole := strings.CutSuffix(part, "#")
		if !strings.HasPrefix(rest, lit) {
			return Shape{}, fmt.Errorf("shape %q of %s: expected %s", s, k, fields)
		}
		rest = rest[len(lit):]
		if !hole {
			continue
		}
		n := 0
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		d, err := strconv.ParseInt(rest[:n], 10, 64)
		if err != nil || d < 1 || d > maxDim {
			return Shape{}, fmt.Errorf("shape %q of %s: expected %s, with every size from 1 to 2^40", s, k, fields)
		}
		sh.Dims = append(sh.Dims, d)
		rest = rest[n:]
	}
	if rest != "" {
		return Shape{}, fmt.Errorf("shape %q of %s: expected %s", s, k, fields)
	}
	return sh, nil
}

// String spells the shape as the profile writes it.
func (s Shape) String() string {
	tmpl, _ := s.kind.template()
	var b strings.Builder
	i := 0
	for _, r := range tmpl {
		if r == '#' && i < len(s.Dims) {
			b.WriteString(strconv.FormatInt(s.Dims[i], 10))
			i++
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// LinearShape is tokens × in → out.
func LinearShape(tokens, in, out int64) Shape { return Shape{Linear, []int64{tokens, in, out}} }

// AttentionShape is attention over batch × heads sequences of seq tokens
// with heads of size dim, fused or not.
func AttentionShape(k Kind, batch, heads, seq, dim int64) Shape {
	return Shape{k, []int64{batch, heads, seq, dim}}
}

// RowsShape is an elementwise or row-wise operator (layernorm, gelu, relu,
// softmax, add) over rows × features.
func RowsShape(k Kind, rows, features int64) Shape { return Shape{k, []int64{rows, features}} }

// ConvShape is a convolution of input x (NCHW) by weight w (OIHW).
func ConvShape(x, w [4]int64, stride int64) Shape {
	return Shape{Conv2D, []int64{x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], stride}}
}

// ParamsShape is an optimizer step over n parameters.
func ParamsShape(k Kind, n int64) Shape { return Shape{k, []int64{n}} }
