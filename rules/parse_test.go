package rules

import (
	"strings"
	"testing"
)

func TestSyntaxErrorsSayWhere(t *testing.T) {
	reg := Default()
	cases := []struct{ text, want string }{
		{"(ewadd ?a ?b)", "1:14: expected \"=>\""},
		{"(ewadd ?a) => ?a", "1:10: ewadd expects 2 operands"},
		{"(frobnicate ?a) => ?a", "1:2: expected an operator"},
		{"(conv2d 1 sideways none 1 ?a ?b) => ?a", "1:11: conv2d: parameter padding: expected one of same|valid"},
		{"(relu ?a) =>\n  (relu %0)", "2:9: binding %0 is not defined"},
		{"(outputs ?a ?b) => ?a", "source has 2 outputs but target has 1"},
		{"(relu ?a) => (relu ?a) extra", "1:24: expected end of rule"},
	}
	for _, c := range cases {
		_, err := ParseRule(reg, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.text, err, c.want)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	for _, s := range []string{
		"(matmul (matmul ?a ?b) ?c) => (matmul ?a (matmul ?b ?c))",
		"(let ((%0 (matmul ?a (concat 1 ?b ?c)))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (matmul ?a ?b) (matmul ?a ?c))",
		"(pool_avg 3 1 same ?a) => (conv2d 1 same none dw ?a (C_pool 3))",
		"(ewmul ?a (I_ewmul)) => ?a",
	} {
		f.Add(s)
	}
	reg := Default()
	f.Fuzz(func(t *testing.T, text string) {
		r, err := ParseRule(reg, text)
		if err != nil {
			return
		}
		if err := r.Src.Validate(); err != nil {
			t.Fatalf("parsed an invalid graph from %q: %v", text, err)
		}
		once := r.Format().String()
		again, err := ParseRule(reg, once)
		if err != nil {
			t.Fatalf("canonical text %q does not parse: %v", once, err)
		}
		if twice := again.Format().String(); twice != once {
			t.Fatalf("canonical text not stable:\n %s\n %s", once, twice)
		}
	})
}
