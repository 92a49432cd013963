package rules_test

import (
	"fmt"

	"rulebook/rules"
)

// A rule written by hand, with inputs named at will and its smaller side
// first, comes back as canonical text: inputs renamed ?a, ?b, … in order
// of appearance, and, once oriented, the larger side as the source. The
// shapes the rule holds at are given per input, named ?a, ?b, … in the
// order the inputs first appear in the text as written, and follow the
// inputs through the renaming.
func ExampleParseText() {
	reg := rules.Default()
	t, err := rules.ParseText(reg,
		"(matmul ?x (ewadd ?w ?v)) => (ewadd (matmul ?x ?w) (matmul ?x ?v))",
		"?a:2x4 ?b:4x3 ?c:4x3", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := t.Rule()
	fmt.Println(r.NumInputs, "inputs at", r.InputShapes)
	_, canon := r.Oriented()
	fmt.Println(canon)
	fmt.Println(canon.Inputs)

	// A mistake is reported at its line and column.
	_, err = rules.ParseText(reg, "(relu ?a ?b) => ?a", "", "")
	fmt.Println(err)
	// Output:
	// 3 inputs at [2x4 4x3 4x3]
	// (ewadd (matmul ?a ?b) (matmul ?a ?c)) => (matmul ?a (ewadd ?b ?c))
	// ?a:2x4 ?b:4x3 ?c:4x3
	// 1:10: expected ")" after 1 operands of relu, got "?b"
}

// NewText takes the two sides apart. A value used twice on one side is
// let-bound, several outputs are listed with outputs, and split0 and split1
// are the two halves of one split: here, one product with a concatenation
// of two weights, split back into the two products it replaces. A term
// written twice is one node, so the canonical text binds it.
func ExampleNewText() {
	reg := rules.Default()
	t, err := rules.NewText(reg,
		"(outputs (split0 1 (matmul ?a (concat 1 ?b ?c))) (split1 1 (matmul ?a (concat 1 ?b ?c))))",
		"(outputs (matmul ?a ?b) (matmul ?a ?c))", "", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := t.Rule()
	fmt.Println(len(r.Src.Nodes), "source nodes,", len(r.Src.Outputs), "outputs")
	fmt.Println(r.Format())
	// Output:
	// 3 source nodes, 2 outputs
	// (let ((%0 (matmul ?a (concat 1 ?b ?c)))) (outputs (split0 1 %0) (split1 1 %0))) => (outputs (matmul ?a ?b) (matmul ?a ?c))
}
