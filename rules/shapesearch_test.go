package rules

import (
	"strings"
	"testing"
)

func TestFindShapes(t *testing.T) {
	cases := []struct {
		rule   string
		inputs string // "" when no shapes type-check
		groups []int  // inferred groups of the source's, then the target's convolutions
	}{
		{"(matmul ?a (matmul ?b ?c)) => (matmul (matmul ?a ?b) ?c)", "2x4 4x4 4x4", nil},
		{"(conv2d 1 same none 1 ?a (ewadd ?b (C_pool 3))) => (ewadd (conv2d 1 same none 1 ?a ?b) (pool_avg 3 1 same ?a))", "2x4x5x5 4x1x3x3", []int{GroupsDepthwise, GroupsDepthwise}},
		{"(concat 1 (conv2d 1 same none 1 ?a ?b) (conv2d 1 same none 1 ?c ?d)) => (conv2d 1 same none 1 (concat 1 ?a ?c) (concat 0 ?b ?d))", "2x4x5x5 2x4x5x5 2x4x5x5 2x4x5x5", []int{1, 1, 2}},
		{"(matmul ?a ?a) => (transpose (conv2d 1 same none 1 ?a ?a))", "", nil},
	}
	pool := DefaultPool()
	for _, c := range cases {
		r, err := ParseRule(Default(), c.rule)
		if err != nil {
			t.Fatal(err)
		}
		// Mark every convolution's groups as TASO leaves them: inferred.
		var convs []*Node
		for _, g := range []*Graph{&r.Src, &r.Dst} {
			for j := range g.Nodes {
				if g.Nodes[j].Op.Name == "conv2d" {
					g.Nodes[j].Params[3] = GroupsInferred
					convs = append(convs, &g.Nodes[j])
				}
			}
		}
		found := r.FindShapes(pool.Shapes(), pool.Constants)
		if found != (c.inputs != "") {
			t.Errorf("%s: found shapes %v, want %q", c.rule, found, c.inputs)
			continue
		}
		if !found {
			continue
		}
		var got []string
		for _, s := range r.InputShapes {
			got = append(got, s.String())
		}
		if strings.Join(got, " ") != c.inputs {
			t.Errorf("%s: shapes %v, want %s", c.rule, got, c.inputs)
		}
		for k, n := range convs {
			if n.Params[3] != c.groups[k] {
				t.Errorf("%s: convolution %d has groups %d, want %d", c.rule, k, n.Params[3], c.groups[k])
			}
		}
	}
}
