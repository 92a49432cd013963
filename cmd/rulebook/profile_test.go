package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/profile"
)

// TestProfileRefuses: a missing interpreter, one without torch (a real
// venv with nothing installed), a bad size set, thread count or clock each
// give one line saying so, and no profile is written.
func TestProfileRefuses(t *testing.T) {
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if err := exec.Command("python3", "-m", "venv", "--without-pip", venv).Run(); err != nil {
		t.Skipf("python3 cannot make a venv: %v", err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--python", filepath.Join(dir, "none")}, "no Python interpreter"},
		{[]string{"--python", filepath.Join(venv, "bin", "python")}, "cannot import torch"},
		{[]string{"--sizes", "huge"}, `--sizes: unknown size set "huge"`},
		{[]string{"--threads", "-1"}, "threads -1: want 0 (torch's choice) or more"},
		{[]string{"--clock", "gpu"}, `--clock: unknown clock "gpu"`},
		{[]string{"--clock", "cpu"}, "the CPU clock (--clock cpu) times the CPU only"},
	}
	for _, c := range cases {
		out := filepath.Join(dir, "p.csv")
		_, err := run(context.Background(), append([]string{"profile", "--out", out, "--sizes", "small", "--no-progress"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line saying %q", c.args, err, c.want)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%v: wrote %s", c.args, out)
		}
	}
}

// TestMeasuredProfilePlans measures a small CPU profile with PyTorch, reads
// it back, and plans with it in both its precisions: the plan's header
// and plan.json name the profile as the cost model, and operators are
// priced from it (an exact match or a fit), not by the roofline alone.
func TestMeasuredProfilePlans(t *testing.T) {
	if err := exec.Command("python3", "-c", "import torch").Run(); err != nil {
		t.Skipf("python3 cannot import torch (pip install -r scripts/requirements-bridge.txt): %v", err)
	}
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.csv")
	ctx := context.Background()
	out, err := run(ctx, "profile", "--out", prof, "--sizes", "small", "--device", "cpu", "--threads", "1", "--no-progress")
	if err != nil {
		t.Fatalf("profile: %v\n%s", err, out)
	}
	if _, err := profile.Load(prof); err != nil {
		t.Fatalf("the written profile does not read back: %v", err)
	}
	for _, prec := range []string{"fp32", "bf16"} {
		planFile := filepath.Join(dir, "plan-"+prec+".json")
		out, err := run(ctx, "plan", "mlp", "--machine", "cpu", "--batch", "64", "--profile", prof, "--precision", prec, "--explain", "-o", planFile)
		if err != nil {
			t.Fatalf("plan --precision %s: %v\n%s", prec, err, out)
		}
		cites := "measured operator costs from " + prof
		if !strings.Contains(out, cites) {
			t.Errorf("plan --precision %s does not say %q:\n%s", prec, cites, out)
		}
		var f struct {
			CostModel string `json:"cost_model"`
			Operators []struct {
				Cost struct{ Source string } `json:"cost"`
			} `json:"operators"`
		}
		data, err := os.ReadFile(planFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		measured := 0
		for _, op := range f.Operators {
			if op.Cost.Source == "profile" || op.Cost.Source == "fit" {
				measured++
			}
		}
		if !strings.Contains(f.CostModel, cites) || measured == 0 {
			t.Errorf("%s: cost model %q, %d operators priced from the profile", planFile, f.CostModel, measured)
		}
	}
}
