package rules

import "testing"

// TestParseNumbersLikeCanonical checks that parsing canonical text gives
// back the canonical numbering of inputs and nodes, so shapes recorded by
// position attach to the right tensors.
func TestParseNumbersLikeCanonical(t *testing.T) {
	reg := Default()
	cases := []string{
		"(let ((%0 (relu ?a))) (smul (smul ?b %0) %0)) => (smul (smul ?b ?a) (relu ?a))",
		"(let ((%0 (concat 0 ?a ?b))) (outputs (split0 0 %0) (split1 0 %0))) => (outputs ?a ?b)",
	}
	for _, text := range cases {
		r, err := ParseRule(reg, text)
		if err != nil {
			t.Fatal(err)
		}
		canon, ct := r.Canonical()
		if ct.String() != text {
			t.Fatalf("not canonical:\n got  %s\n want %s", ct, text)
		}
		for side, pair := range [][2]*Graph{{&r.Src, &canon.Src}, {&r.Dst, &canon.Dst}} {
			if FormatGraph(pair[0]) != FormatGraph(pair[1]) || len(pair[0].Nodes) != len(pair[1].Nodes) {
				t.Fatalf("side %d differs after canonicalisation", side)
			}
			for j := range pair[0].Nodes {
				if pair[0].Nodes[j].Op != pair[1].Nodes[j].Op {
					t.Errorf("side %d node %d: parsed %s, canonical %s", side, j, pair[0].Nodes[j].Op.Name, pair[1].Nodes[j].Op.Name)
				}
			}
		}
	}
}

// TestParseTextSides: the grammar lets parentheses delimit "=>" and "if"
// as well as spaces; ParseText cuts the sides at those atoms, so the Text
// it returns reads back as the rule it parsed.
func TestParseTextSides(t *testing.T) {
	reg := Default()
	cases := []struct {
		text           string
		src, dst, cond string
	}{
		{"(transpose (transpose ?a)) => ?a", "(transpose (transpose ?a))", "?a", ""},
		{"(transpose(transpose ?0))=> ?0", "(transpose(transpose ?0))", "?0", ""},
		{"(relu ?a)=>(relu (relu ?a))", "(relu ?a)", "(relu (relu ?a))", ""},
		{"?a\t=>\t(relu (relu ?a))", "?a", "(relu (relu ?a))", ""},
		{"(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b))if(kernel ?b 1 1)",
			"(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b)", "(pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b))", "(kernel ?b 1 1)"},
	}
	for _, c := range cases {
		text, err := ParseText(reg, c.text, "", "")
		if err != nil {
			t.Errorf("%q: %v", c.text, err)
			continue
		}
		if text.Src != c.src || text.Dst != c.dst || text.Cond != c.cond {
			t.Errorf("%q: sides %q, %q, %q; want %q, %q, %q", c.text, text.Src, text.Dst, text.Cond, c.src, c.dst, c.cond)
		}
		if _, err := text.Checked(reg); err != nil {
			t.Errorf("%q: its Text %q does not read back: %v", c.text, text.String(), err)
		}
	}
}
