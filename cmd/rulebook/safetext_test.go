package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/compare"
	"rulebook/rules"
	"rulebook/verify"
)

// hostileName drives a terminal when printed raw: red text, a carriage
// return and a screen clear (issue 25).
const hostileName = "\x1b[31mevil\r\x1b[2J"

// Names from input files reach the terminal escaped (issue 25): a machine
// file's name in plan's report, and a FlexFlow rule's name in compare's.
func TestNamesFromFilesPrintEscaped(t *testing.T) {
	machine := filepath.Join(t.TempDir(), "m.json")
	must(t, os.WriteFile(machine, []byte(`{"name": "\u001b[31mevil\r\u001b[2J", "nodes": 1, "devices_per_node": 2,
		"device": {"name": "d", "peak_flops": 1e13, "memory_bandwidth": 1e12, "memory_bytes": 1e10},
		"intra_node": {"bandwidth": 1e11, "latency": 1e-6}, "inter_node": {"bandwidth": 1e10, "latency": 1e-5}}`), 0o644))
	planned, err := run(context.Background(), "plan", "mlp", "--machine", machine, "--batch", "8")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, planned)
	}
	var compared bytes.Buffer
	rule, err := rules.ParseRule(rules.All(), "(relu (relu ?a)) => (relu ?a)")
	must(t, err)
	r := &compare.Report{Verdicts: []compare.Verdict{{Foreign: compare.Foreign{Name: hostileName, Rule: rule}, Relation: compare.Missed}},
		Proofs: make([]verify.Result, 1)}
	r.WriteText(&compared, "flexflow.json", true)
	for what, out := range map[string]string{"plan": planned, "compare": compared.String()} {
		if strings.ContainsAny(out, "\x1b\r") || !strings.Contains(out, `\x1b[31mevil\r\x1b[2J`) {
			t.Errorf("%s prints the name raw or not at all:\n%q", what, out)
		}
	}
}
