package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/checked"
	"rulebook/plan"
)

// TestPlanEmitTorchPipeline: --emit torch on a plan with pipeline stages
// prints the comparison, then fails with plan.ErrNotTorch, and writes no
// file (it used to exit with neither table nor files).
func TestPlanEmitTorchPipeline(t *testing.T) {
	dir := t.TempDir()
	out, err := run(context.Background(), "plan", "mlp", "--machine", "summit:1", "--batch", "1536", "--strategy", "pp",
		"-o", filepath.Join(dir, "p.json"), "--emit", "torch")
	if !errors.Is(err, plan.ErrNotTorch) || !strings.Contains(out, "* chosen: pp ") {
		t.Errorf("error %v; output:\n%s", err, out)
	}
	if written, _ := filepath.Glob(filepath.Join(dir, "*")); len(written) > 0 {
		t.Errorf("wrote %v", written)
	}
}

// TestPlanMemoryLimitFlag: --memory-limit and --bucket-mb NaN, Inf and
// absurd sizes are refused before anything is read.
func TestPlanMemoryLimitFlag(t *testing.T) {
	for _, flag := range []string{"--memory-limit", "--bucket-mb"} {
		for _, v := range []string{"NaN", "+Inf", "-1", "1e300"} {
			_, err := run(context.Background(), "plan", "mlp", "--batch", "12", flag, v)
			if !errors.Is(err, checked.ErrRange) {
				t.Errorf("%s %s: %v; want checked.ErrRange", flag, v, err)
			}
		}
	}
}

// TestPlanAttentionFlag: --attention names the mode in the header, and an
// unknown mode is refused in one line before anything is read.
func TestPlanAttentionFlag(t *testing.T) {
	for _, c := range []struct{ mode, want string }{{"fused", "attention fused"}, {"unfused", "attention unfused"}} {
		out, err := run(context.Background(), "plan", "bert-large", "--batch", "6", "--strategy", "dp", "--attention", c.mode)
		if err != nil || !strings.Contains(out, c.want) {
			t.Errorf("--attention %s: %v\n%s", c.mode, err, out)
		}
	}
	_, err := run(context.Background(), "plan", "bert-large", "--batch", "6", "--attention", "flash")
	if err == nil || err.Error() != `--attention: unknown attention "flash" (known: fused, unfused)` {
		t.Errorf("--attention flash: %v", err)
	}
}

// TestPlanLeversFlag: --levers restricts the memory levers (the label
// names the one pulled), and an unknown lever is refused in one line
// before anything is written.
func TestPlanLeversFlag(t *testing.T) {
	args := []string{"plan", "bert-large", "--machine", "summit:1", "--batch", "96", "--precision", "fp32", "--strategy", "dp"}
	for _, c := range []struct{ levers, want string }{{"recompute", "dp6×tp1+recompute"}, {"zero", "dp6×tp1+zero"}} {
		out, err := run(context.Background(), append(args, "--levers", c.levers)...)
		if err != nil || !strings.Contains(out, "* chosen: dp "+c.want) {
			t.Errorf("--levers %s: %v\n%s", c.levers, err, out)
		}
	}
	dir := t.TempDir()
	out, err := run(context.Background(), append(args, "--levers", "zero,offload", "-o", filepath.Join(dir, "p.json"))...)
	if !errors.Is(err, plan.ErrUnknownLever) || strings.Count(err.Error(), "\n") > 0 || out != "" {
		t.Errorf("--levers zero,offload: %v; output %q", err, out)
	}
	if written, _ := filepath.Glob(filepath.Join(dir, "*")); len(written) > 0 {
		t.Errorf("wrote %v", written)
	}
}
