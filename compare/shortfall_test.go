package compare

import (
	"testing"

	"rulebook/rules"
)

// TestShortfallChecks holds the checks that explain a foreign rule's
// absence to what they report on small graphs.
func TestShortfallChecks(t *testing.T) {
	cases := []struct {
		name  string
		check func(*rules.Graph) string
		graph string
		want  string
	}{
		{"grouped", groupedConcatKernels, "(conv2d 1 same none 2 ?a (concat 0 ?b ?c))",
			"both kernels need the same number of output channels (conv2d of 2 groups over their concat on axis 0; TASO infers groups from its pool's shapes, where they do)"},
		{"depth-wise", groupedConcatKernels, "(conv2d 1 same none dw ?a (concat 0 ?b ?c))",
			"both kernels need the same number of output channels per input channel (depth-wise conv2d over their concat on axis 0)"},
		{"one group", groupedConcatKernels, "(conv2d 1 same none 1 ?a (concat 0 ?b ?c))", ""},
		{"other axis", groupedConcatKernels, "(conv2d 1 same none 2 ?a (concat 1 ?b ?c))", ""},
		{"kernel input", groupedConcatKernels, "(conv2d 1 same none 2 ?a ?b)", ""},
		{"stride 2", paramNotGenerated, "(conv2d 2 same none 1 ?a ?b)", "conv2d stride 2"},
		{"valid padding", paramNotGenerated, "(pool_max 3 1 valid ?a)", "pool_max padding valid"},
		{"generated", paramNotGenerated, "(pool_max 3 1 same ?a)", ""},
	}
	for _, c := range cases {
		g, err := rules.ParseGraph(rules.Default(), c.graph)
		if err != nil {
			t.Fatalf("%s: %v", c.graph, err)
		}
		if got := c.check(g); got != c.want {
			t.Errorf("%s: %s: got %q, want %q", c.name, c.graph, got, c.want)
		}
	}
}
