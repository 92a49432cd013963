package rewrite_test

import (
	"context"
	"fmt"

	"rulebook/rewrite"
	"rulebook/rules"
)

// Find embeds a rule's source in a graph and Apply puts its target in
// the matched place. The rule's input ?a stands for whatever the graph
// computes there, here a matrix product.
func ExampleApply() {
	reg := rules.Default()
	rule, err := rules.ParseRule(reg, "(transpose (transpose ?a)) => ?a")
	if err != nil {
		fmt.Println(err)
		return
	}
	host, err := rules.ParseGraph(reg, "(relu (transpose (transpose (matmul ?x ?w))))")
	if err != nil {
		fmt.Println(err)
		return
	}
	rewrite.Find(&rule.Src, host, func(m *rewrite.Match) bool {
		fmt.Println("pattern nodes at host nodes", m.Nodes, "?a is host node", m.Inputs[0].Node)
		next, err := rewrite.Apply(host, &rule.Src, &rule.Dst, m)
		if err != nil {
			fmt.Println(err)
			return false
		}
		fmt.Println(rules.FormatGraph(host), "becomes", rules.FormatGraph(next))
		return true // look for further matches
	})
	// Output:
	// pattern nodes at host nodes [1 2] ?a is host node 0
	// (relu (transpose (transpose (matmul ?a ?b)))) becomes (relu (matmul ?a ?b))
}

// Derive finds a short sequence of rewrites between two graphs; rules are
// equalities, so each is offered in both directions (Both).
func ExampleDerive() {
	reg := rules.Default()
	var rws []rewrite.Rewrite
	for i, text := range []string{
		"(transpose (matmul ?a ?b)) => (matmul (transpose ?b) (transpose ?a))",
		"(transpose (transpose ?a)) => ?a",
	} {
		r, err := rules.ParseRule(reg, text)
		if err != nil {
			fmt.Println(err)
			return
		}
		rws = append(rws, rewrite.Both(r, i)...)
	}
	// Both graphs are parsed as one rule, so that ?a and ?b are the same
	// inputs in each.
	goal, err := rules.ParseRule(reg, "(transpose (matmul (transpose ?a) ?b)) => (matmul (transpose ?b) ?a)")
	if err != nil {
		fmt.Println(err)
		return
	}
	steps, err := rewrite.Derive(context.Background(), &goal.Src, &goal.Dst, rws, rewrite.Limits{Steps: 4, Nodes: 8, Explored: 1000})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range steps {
		// Term numbers inputs as the graphs do: ?0 is ?a, ?1 is ?b.
		fmt.Printf("rule %d, reversed %v: %s\n", s.Rule, s.Reversed, rewrite.Term(s.Result))
	}
	// Output:
	// rule 0, reversed false: (matmul (transpose ?1) (transpose (transpose ?0)))
	// rule 1, reversed false: (matmul (transpose ?1) ?0)
}
