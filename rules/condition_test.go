package rules

import (
	"strings"
	"testing"
)

// TestConditionText checks that conditions parse, are renamed with the
// inputs into canonical text, survive orientation and read back the same.
func TestConditionText(t *testing.T) {
	reg := Default()
	cases := []struct{ in, oriented string }{
		{"(conv2d 1 same none 1 (pool_avg 3 1 same ?x) ?w) => (pool_avg 3 1 same (conv2d 1 same none 1 ?x ?w)) if (kernel ?w 1 1)",
			"(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b)) if (kernel ?b 1 1)"},
		// Written the other way round and with a repeat: the larger side
		// first, the condition follows its input's new name, once (the
		// mirror image reads the same but for the condition, which decides).
		{"(conv2d 1 same none 1 ?w (ewadd ?k ?v)) => (conv2d 1 same none 1 ?w (ewadd ?v ?k)) if (kernel ?v 1 1) (kernel ?v 1 1)",
			"(conv2d 1 same none 1 ?a (ewadd ?b ?c)) => (conv2d 1 same none 1 ?a (ewadd ?c ?b)) if (kernel ?b 1 1)"},
		{"(ewadd ?a ?b) => (ewadd ?b ?a)", "(ewadd ?a ?b) => (ewadd ?b ?a)"},
	}
	for _, c := range cases {
		r, err := ParseRule(reg, c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		_, text := r.Oriented()
		if text.String() != c.oriented {
			t.Errorf("oriented:\n got  %s\n want %s", text, c.oriented)
		}
		back, err := ParseText(reg, text.String(), "", "")
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if back.String() != text.String() || back.Cond != text.Cond {
			t.Errorf("read back %q (cond %q), wrote %q", back, back.Cond, text)
		}
		if (text.Cond != "") != strings.Contains(c.in, " if ") {
			t.Errorf("%s: cond %q", c.in, text.Cond)
		}
	}
}

// TestConditionErrors checks that malformed conditions are refused where
// they are.
func TestConditionErrors(t *testing.T) {
	reg := Default()
	cases := []struct{ text, want string }{
		{"(relu ?a) => (relu ?a) if", "expected a condition after \"if\""},
		{"(relu ?a) => (relu ?a) if (kernel ?b 1 1)", "expected an input of the rule"},
		{"(relu ?a) => (relu ?a) if (shape ?a 1 1)", "expected a condition (kernel)"},
		{"(relu ?a) => (relu ?a) if (kernel ?a 0 1)", "is not a positive integer"},
		{"(relu ?a) => (relu ?a) if (kernel ?a 1 1", "expected \")\""},
	}
	for _, c := range cases {
		_, err := ParseRule(reg, c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.text, err, c.want)
		}
	}
}

// TestConditionHolds checks a kernel condition against shapes.
func TestConditionHolds(t *testing.T) {
	r, err := ParseRule(Default(), "(conv2d 1 same none 1 (pool_avg 3 1 same ?a) ?b) => (pool_avg 3 1 same (conv2d 1 same none 1 ?a ?b)) if (kernel ?b 1 1)")
	if err != nil {
		t.Fatal(err)
	}
	x := NewShape(1, 8, 5, 5)
	cases := []struct {
		kernel Shape
		want   bool
	}{
		{NewShape(4, 8, 1, 1), true},
		{NewShape(4, 8, 3, 3), false},
		{NewShape(4, 8, 1, 3), false},
		{NewShape(8, 1), false},
	}
	for _, c := range cases {
		if got := r.Holds([]Shape{x, c.kernel}); got != c.want {
			t.Errorf("kernel %v: Holds %v, want %v", c.kernel, got, c.want)
		}
	}
}
