package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestErrorsPrintEscaped: a path with terminal escapes in an error reaches
// standard error escaped, as the binary prints it.
func TestErrorsPrintEscaped(t *testing.T) {
	out, err := exec.Command(rulebookBinary(t), "run", "m\x1b[31m\r\x1b[2J.onnx").CombinedOutput()
	if err == nil {
		t.Fatalf("a missing model ran: %s", out)
	}
	if s := string(out); strings.ContainsAny(s, "\x1b\r") || !strings.Contains(s, `m\x1b[31m\r\x1b[2J.onnx`) {
		t.Errorf("printed %q", s)
	}
}
