package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rulebook/store"
)

// TestCtrlCStopsVerify sends a real SIGINT to a running verify: Z3 must
// not swallow it (it installs its own handler unless told not to), the run
// must stop, and no result may record the interruption as a reason.
func TestCtrlCStopsVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rulebook")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	db := filepath.Join(dir, "r.db")
	if out, err := exec.Command(bin, "generate", "--max-ops", "3", "--db", db, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("generate: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "verify", "../../axioms", "--db", db, "--workers", "1", "--no-progress")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 {
			t.Fatalf("verify after SIGINT: %v (want exit 130)\n%s", err, out.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("verify did not stop within 10 s of SIGINT\n%s", out.String())
	}
	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, _ := s.Runs(context.Background())
	if last := runs[len(runs)-1]; last.Status != "interrupted" {
		t.Errorf("run %d is %s, want interrupted", last.ID, last.Status)
	}
	rs, _ := s.ListRules(context.Background(), store.Filter{})
	for _, r := range rs {
		if p, ok, _ := s.LatestProof(context.Background(), r.ID); ok && strings.Contains(p.Reason, "interrupt") {
			t.Errorf("rule %d stored with reason %q", r.ID, p.Reason)
		}
	}
	_ = os.Remove(bin)
}
