package exchange

import (
	"strings"
	"testing"

	"rulebook/rules"
)

// TestReadFlexFlowParallel: with every operator, all 640 rules of FlexFlow's
// file import, FlexFlow's dimensions read unreversed and the linear weight
// as (in, out), and each parallel rule that type-checks somewhere gets the
// plainest input layouts at which it does.
func TestReadFlexFlowParallel(t *testing.T) {
	f, err := ReadFlexFlow(flexFlowFile, anchor(t, flexFlowFile), rules.All())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Rules) != 640 || len(f.Skipped) != 0 || len(f.Unknown) != 0 {
		t.Fatalf("%d imported, %d skipped (%v), unknown %v; want 640, none skipped", len(f.Rules), len(f.Skipped), f.Skipped[:min(3, len(f.Skipped))], f.Unknown)
	}
	textsIn(t, rules.All(), ruleList(f.Rules)) // valid, and read back
	want := map[string][2]string{
		"taso_rule_0":   {"(combine 1 2 (partition 2 2 (partition 1 2 ?a))) => (partition 2 2 ?a)", "?a:4x4x4"},
		"taso_rule_238": {"(linear none (partition 1 2 ?a) (replicate 2 ?b)) => (partition 1 2 (linear none ?a ?b))", "?a:4x4x4 ?b:4x4"},
		"taso_rule_241": {"(linear none (replicate 2 ?a) (partition 1 2 ?b)) => (partition 2 2 (linear none ?a ?b))", "?a:4x4x4 ?b:4x4"},
		// Layouts differ (dimension 1 is cut on one side only): no shapes.
		"taso_rule_169": {"(outputs (linear relu ?a ?b) (reduce 2 (partition 1 2 ?c))) => (outputs (relu (linear none ?a ?b)) (reduce 2 ?c))", ""},
	}
	for _, n := range f.Rules {
		w, ok := want[n.Name]
		if !ok {
			continue
		}
		delete(want, n.Name)
		if _, got := n.Rule.Oriented(); got.String() != w[0] || got.Inputs != w[1] {
			t.Errorf("%s:\n got %s | %s\nwant %s | %s", n.Name, got, got.Inputs, w[0], w[1])
		}
	}
	if len(want) > 0 {
		t.Errorf("not imported: %v", want)
	}
}

// TestParallelLayoutsFound: a rule about partial sums or a cut dimension
// gets inputs laid out as it needs.
func TestParallelLayoutsFound(t *testing.T) {
	cases := []struct{ rule, inputs string }{
		{"(reduce 2 (ewadd ?a ?b)) => (ewadd (reduce 2 ?a) (reduce 2 ?b))", "?a:4x4x4+sum2 ?b:4x4x4+sum2"},
		{"(partition 0 2 (combine 0 2 ?a)) => ?a", "?a:4/2x4x4"},
		{"(relu (partition 1 2 ?a)) => (partition 1 2 (relu ?a))", "?a:4x4x4"},
	}
	for _, c := range cases {
		r, err := rules.ParseRule(rules.All(), c.rule)
		if err != nil {
			t.Fatal(err)
		}
		if !findParallelShapes(r) {
			t.Errorf("%s: no layouts found", c.rule)
			continue
		}
		var parts []string
		for i, s := range r.InputShapes {
			parts = append(parts, rules.InputName(i)+":"+s.String())
		}
		if got := strings.Join(parts, " "); got != c.inputs {
			t.Errorf("%s: inputs %s, want %s", c.rule, got, c.inputs)
		}
	}
}

// TestFlexFlowDegreeRefused: a parallel operator without a degree, or with
// degree 0, makes the file unreadable, with one line naming the rule.
func TestFlexFlowDegreeRefused(t *testing.T) {
	rule := func(para string) string {
		return `{"_t": "RuleCollection", "rule": [{"_t": "Rule", "name": "my_rule",
  "srcOp": [{"_t": "Operator", "type": "OP_PARTITION", "input": [{"_t": "Tensor", "opId": -1, "tsId": 0}], "para": [` + para + `]},
            {"_t": "Operator", "type": "OP_COMBINE", "input": [{"_t": "Tensor", "opId": 0, "tsId": 0}],
             "para": [{"_t": "Parameter", "key": "PM_PARALLEL_DIM", "value": 1}, {"_t": "Parameter", "key": "PM_PARALLEL_DEGREE", "value": 2}]}],
  "dstOp": [{"_t": "Operator", "type": "OP_RELU", "input": [{"_t": "Tensor", "opId": -1, "tsId": 0}], "para": []}],
  "mappedOutput": [{"_t": "MapOutput", "srcOpId": 1, "srcTsId": 0, "dstOpId": 0, "dstTsId": 0}]}]}`
	}
	dim := `{"_t": "Parameter", "key": "PM_PARALLEL_DIM", "value": 1}`
	cases := []struct{ para, want string }{
		{dim, `ff.json:2:13: rule[0].srcOp[0]: OP_PARTITION lacks PM_PARALLEL_DEGREE (rule "my_rule")`},
		{dim + `, {"_t": "Parameter", "key": "PM_PARALLEL_DEGREE", "value": 0}`, `ff.json:2:13: rule[0].srcOp[0]: OP_PARTITION PM_PARALLEL_DEGREE 0: expected a degree from 1 to 1024 (rule "my_rule")`},
	}
	for _, c := range cases {
		_, err := ReadFlexFlow("ff.json", []byte(rule(c.para)), rules.All())
		if err == nil || err.Error() != c.want {
			t.Errorf("got %v\nwant %s", err, c.want)
		}
	}
	if _, err := ReadFlexFlow("ff.json", []byte(rule(dim+`, {"_t": "Parameter", "key": "PM_PARALLEL_DEGREE", "value": 2}`)), rules.All()); err != nil {
		t.Errorf("a rule with its degree: %v", err)
	}
}

// TestOwnFileDegreeDividesSize: a rule file whose recorded shapes a
// parallel rule's degree does not divide is refused in one line.
func TestOwnFileDegreeDividesSize(t *testing.T) {
	data := []byte("(combine 0 2 (partition 0 2 ?a)) => (relu ?a)  ; ?a:5x4 |\n")
	_, err := Read("bad.sexpr", data, rules.All(), "sexpr")
	want := "bad.sexpr: rule 1: shapes: source: node 0: partition: degree 2 does not divide dimension 0 of 5x4 into equal pieces"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
	good := []byte("(combine 0 2 (partition 0 2 ?a)) => (relu ?a)  ; ?a:4x4 |\n")
	if _, err := Read("good.sexpr", good, rules.All(), "sexpr"); err != nil {
		t.Errorf("good shapes: %v", err)
	}
}
