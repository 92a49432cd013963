package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileRefuses: a missing interpreter, one without torch (a real
// venv with nothing installed) and a bad size set each give one line
// saying so, and no profile is written.
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
		{[]string{"--threads", "-1"}, "--threads must not be negative"},
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
