package rules

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

func TestSyntaxErrorsSayWhere(t *testing.T) {
	reg := Default()
	cases := []struct{ text, want string }{
		{"(ewadd ?a ?b)", "1:14: expected \"=>\""},
		{"(ewadd ?a) => ?a", "1:10: ewadd expects 2 operands"},
		{"(frobnicate ?a) => ?a", "1:2: expected an operator"},
		{"(conv2d 1 sideways none 1 ?a ?b) => ?a", "1:11: conv2d: parameter padding: expected one of same|valid|sym"},
		{"(relu ?a) =>\n  (relu %0)", "2:9: binding %0 is not defined"},
		{"(let ((%0 (relu ?a)) (%1 (relu %0))) %0) => ?a", "1:23: binding %1 is not used by any output"},
		{"(let ((%0 (relu ?a)) (%1 (relu %0)) (%2 (relu %1))) %0) => ?a", "1:23: binding %1 is not used by any output"},
		{"(outputs ?a ?b) => ?a", "source has 2 outputs but target has 1"},
		{"(relu ?a) => (relu ?a) extra", "1:24: expected end of rule"},
		{"(transpose (transpose ?0)) => ?\f", "1:31: expected an input ?name of letters, digits and _, got \"?\\f\""},
		{"(let ((%\v (relu ?a))) %\v) => ?a", "1:8: expected a binding name like %0"},
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
		nested("relu", "?a", MaxDepth+1) + " => ?a",
		letChain(MaxDepth+1) + " => ?a",
		"(outputs" + strings.Repeat(" (relu ?a)", MaxOutputs+1) + ") => ?a",
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

// nested writes n applications of op around x: "(relu (relu ... ?a))".
func nested(op, x string, n int) string {
	return strings.Repeat("("+op+" ", n) + x + strings.Repeat(")", n)
}

// letChain binds n relus in a chain, each reading the one before, and
// returns the last: a chain n operators long that is nested only 2 deep.
func letChain(n int) string {
	var b strings.Builder
	b.WriteString("(let ((%0 (relu ?a))")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, " (%%%d (relu %%%d))", i, i-1)
	}
	fmt.Fprintf(&b, ") %%%d)", n-1)
	return b.String()
}

// TestParseLimits: rules deeper, wider or with more outputs than the
// limits are refused with the position and the limit, in bounded time and
// memory, however large; rules at the limits parse.
func TestParseLimits(t *testing.T) {
	reg := Default()
	var wide strings.Builder
	wide.WriteString("(let (")
	for i := 0; i <= MaxNodes; i++ {
		fmt.Fprintf(&wide, "(%%%d (relu ?x%d)) ", i, i)
	}
	wide.WriteString(") (ewadd %0 %1)) => (ewadd ?x0 ?x1)")
	outputs := "(outputs" + strings.Repeat(" (relu ?a)", MaxOutputs+1) + ")"
	for _, c := range []struct{ name, text, want string }{
		{"nested 100k deep", nested("relu", "?a", 100_000) + " => ?a", fmt.Sprintf("1:%d: operators nested more than %d deep (rulebook's limit)", 6*MaxDepth+1, MaxDepth)},
		{"nested one too deep on the target", "?a => " + nested("relu", "?a", MaxDepth+1), "operators nested more than 256 deep"},
		{"a let chain one too long", letChain(MaxDepth+1) + " => ?a", "a chain of more than 256 operators through let bindings"},
		{"a let chain 100k long", letChain(100_000) + " => ?a", "a chain of more than 256 operators through let bindings"},
		{"too many operators", wide.String(), fmt.Sprintf("more than %d operators on one side", MaxNodes)},
		{"too many outputs", outputs + " => " + outputs, fmt.Sprintf("more than %d outputs", MaxOutputs)},
	} {
		_, err := ParseRule(reg, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// 8 million nested relus, 48 MB of text: refused at the limit without
	// reading the rest.
	huge := nested("relu", "?a", 8_000_000) + " => ?a"
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ParseRule(reg, huge)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "operators nested more than 256 deep") {
		t.Errorf("48 MB of nested relus: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("refusing 48 MB of nested relus allocated %d bytes", alloc)
	}
	for _, text := range []string{
		nested("relu", "?a", MaxDepth) + " => (relu ?a)",
		letChain(MaxDepth) + " => (relu ?a)",
		"(outputs" + strings.Repeat(" ?a", MaxOutputs) + ") => (outputs" + strings.Repeat(" ?a", MaxOutputs) + ")",
	} {
		if _, err := ParseRule(reg, text); err != nil {
			t.Errorf("a rule at the limits: %v", err)
		}
	}
}
