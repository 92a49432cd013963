package verify_test

import (
	"context"
	"fmt"

	"rulebook/axioms"
	"rulebook/rules"
	"rulebook/verify"
)

// Run decides each job's rule with Z3 from the axioms: a proof names the
// axioms it used (its unsat core); a rule not proved is tested on concrete
// inputs at the shapes it was found with, and at others, and refuted if
// the two sides differ.
func ExampleRun() {
	reg := rules.Default()
	set, err := axioms.Builtin(rules.All())
	if err != nil {
		fmt.Println(err)
		return
	}
	var jobs []verify.Job
	for i, text := range []string{
		"(transpose (matmul ?a (transpose ?b))) => (matmul ?b (transpose ?a))",
		// relu does not distribute over a sum.
		"(relu (ewadd ?a ?b)) => (ewadd (relu ?a) (relu ?b))",
	} {
		t, err := rules.ParseText(reg, text, "?a:2x4 ?b:2x4", "")
		if err != nil {
			fmt.Println(err)
			return
		}
		jobs = append(jobs, verify.Job{ID: int64(i + 1), Rule: t.Rule()})
	}
	cfg := verify.Config{Registry: reg, Axioms: set, Workers: 1}
	err = verify.Run(context.Background(), cfg, jobs, func(j verify.Job, res verify.Result) error {
		// Reason says why a rule is not proved; for a refuted rule it
		// names the differing output element and both values.
		fmt.Printf("rule %d: %s, core %v\n", j.ID, res.Status, res.Core)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// rule 1: proved, core [matmul-transpose transpose-involution]
	// rule 2: refuted, core []
}
