package main

import (
	"context"
	"strings"
	"testing"
)

// TestHelpExplainsItself: compare's help explains the "~" of its
// "implied by" lists, and run's help does not send the reader to itself.
func TestHelpExplainsItself(t *testing.T) {
	ctx := context.Background()
	compareHelp, err := run(ctx, "compare", "--help")
	if err != nil || !strings.Contains(compareHelp, `"implied by 298,~3"`) || !strings.Contains(compareHelp, `"~" marks a rule applied backwards, target to`) {
		t.Errorf("compare --help (err %v):\n%s", err, compareHelp)
	}
	runHelp, err := run(ctx, "run", "--help")
	if err != nil || strings.Contains(runHelp, "'rulebook run --help'") || !strings.Contains(runHelp, "squeezenet1_1-full_test_data_set_0/input_0.pb") {
		t.Errorf("run --help (err %v):\n%s", err, runHelp)
	}
}
