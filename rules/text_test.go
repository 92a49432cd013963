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
