package compare

import (
	"context"
	"testing"

	"rulebook/rules"
)

func TestCompare(t *testing.T) {
	parse := func(text string) *rules.Rule {
		r, err := rules.ParseRule(rules.Default(), text)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return r
	}
	ours := []*rules.Rule{
		parse("(ewadd ?a ?b) => (ewadd ?b ?a)"),
		parse("(ewadd (ewadd ?a ?b) ?c) => (ewadd ?a (ewadd ?b ?c))"),
		parse("(transpose (transpose ?a)) => ?a"),
	}
	cases := []struct {
		rule  string
		want  Relation
		steps int
	}{
		{"(ewadd ?x ?y) => (ewadd ?y ?x)", Contained, 0},
		{"(ewadd ?a (ewadd ?b ?c)) => (ewadd (ewadd ?a ?b) ?c)", Contained, 0}, // the mirror image
		{"(ewadd (ewadd ?a ?b) ?c) => (ewadd (ewadd ?c ?b) ?a)", Implied, 0},
		{"(transpose (transpose (ewadd ?a ?b))) => (ewadd ?b ?a)", Implied, 2},
		{"(ewmul ?a ?b) => (ewmul ?b ?a)", Missed, 0},
		{"(relu ?a) => (relu ?a)", Trivial, 0},
	}
	var theirs []Foreign
	for _, c := range cases {
		theirs = append(theirs, Foreign{Name: c.rule, Rule: parse(c.rule)})
	}
	vs, err := Compare(context.Background(), ours, theirs, DefaultLimits, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		v := vs[i]
		if v.Relation != c.want {
			t.Errorf("%s: %s, want %s", c.rule, v.Relation, c.want)
		}
		if c.steps > 0 && len(v.Steps) != c.steps {
			t.Errorf("%s: implied in %d steps, want %d", c.rule, len(v.Steps), c.steps)
		}
		if v.Relation == Implied && len(v.Steps) == 0 {
			t.Errorf("%s: implied without steps", c.rule)
		}
	}
}
