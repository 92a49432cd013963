package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rulebook/store"
)

// TestCtrlCStopsVerify sends a real SIGINT to a running verify: Z3 must
// not swallow it (it installs its own handler unless told not to), the run
// must stop within 2 s, and no result may record the interruption as a
// reason.
func TestCtrlCStopsVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := buildBinary(t)
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
	awaitRunning(t, db, "verify")
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 {
			t.Fatalf("verify after SIGINT: %v (want exit 130)\n%s", err, out.String())
		}
	case <-time.After(stopWithin):
		cmd.Process.Kill()
		t.Fatalf("verify did not stop within %s of SIGINT\n%s", stopWithin, out.String())
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
}

// awaitRunning waits until db records a running run of command, so that
// a signal sent next reaches the command at work, not while it loads: on a
// busy machine, checking the axioms before the run starts can take
// seconds.
func awaitRunning(t *testing.T, db, command string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if s, err := store.OpenExisting(context.Background(), db); err == nil {
			runs, _ := s.Runs(context.Background())
			s.Close()
			if n := len(runs); n > 0 && runs[n-1].Command == command && runs[n-1].Status == "running" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s run started within 30 s", command)
}

// stopWithin is how soon after Ctrl-C every command must have stopped.
const stopWithin = 2 * time.Second

// TestCtrlCStopsEveryCommand sends a real SIGINT to each command that
// writes to the database (or a file) while it works: each stops within
// stopWithin, exiting 130 (or 0 when it finished first), and leaves the
// database whole, with no run left running and an interrupted run
// recorded as such. release and export take well under 0.1 s on a ≤3
// database, so for them the test shows that they neither hang nor leave
// anything half-written.
func TestCtrlCStopsEveryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and a ≤3 rulebook")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	built := filepath.Join(dir, "built.db")
	if out, err := run(context.Background(), "build", "--max-ops", "3", "--no-progress", "--db", built); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cases := []struct {
		name  string
		args  []string
		fresh bool // a new database, not a copy of the built one
		after time.Duration
	}{
		{"generate", []string{"generate", "--max-ops", "3", "--no-progress"}, true, time.Second},
		{"verify", []string{"verify", "../../axioms", "--recheck", "--workers", "1", "--no-progress"}, false, 1500 * time.Millisecond},
		{"prune", []string{"prune", "--no-progress"}, false, 150 * time.Millisecond},
		{"release", []string{"release", "v2"}, false, 150 * time.Millisecond},
		{"import", []string{"import", sharedAnchor(t, "flexflow-graph_subst_3_v2.json")}, true, 150 * time.Millisecond},
		{"export", []string{"export", "--version", "v1", "--format", "json", "-o", filepath.Join(dir, "v1.json")}, false, 150 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "r.db")
			if !c.fresh {
				data, err := os.ReadFile(built)
				must(t, err)
				must(t, os.WriteFile(db, data, 0o644))
			}
			code, took := interrupt(t, bin, append(c.args, "--db", db), c.after)
			if code != 0 && code != 130 {
				t.Fatalf("exit %d after SIGINT; want 130, or 0 if it finished first", code)
			}
			t.Logf("exit %d, %s after SIGINT", code, took.Round(time.Millisecond))
			checkAfterInterrupt(t, db, c.name, code)
		})
	}
}

// interrupt runs bin with args, sends SIGINT after the given time and
// returns the exit code and how long the process took to stop after it;
// it fails the test if that is more than stopWithin.
func interrupt(t *testing.T, bin string, args []string, after time.Duration) (int, time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(after)
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), time.Since(sent)
	case <-time.After(stopWithin):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not stop within %s of SIGINT\n%s", args, stopWithin, out.String())
		return 0, 0
	}
}

// checkAfterInterrupt opens the database as the next command would: it
// must pass quick_check, hold no run still running, and record the
// command's last run as interrupted when the command exited 130 (release
// records its run with its version, in one transaction: an interrupted
// release leaves neither).
func checkAfterInterrupt(t *testing.T, path, command string, code int) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		return // an export interrupted before it opened the database
	}
	s, err := store.OpenExisting(context.Background(), path)
	if err != nil {
		t.Fatalf("after SIGINT: %v", err)
	}
	defer s.Close()
	runs, err := s.Runs(context.Background())
	must(t, err)
	var last *store.Run
	for i, r := range runs {
		if r.Status == store.RunRunning {
			t.Errorf("run %d (%s) is still running", r.ID, r.Command)
		}
		if r.Command == command {
			last = &runs[i]
		}
	}
	if code == 130 && command != "release" && command != "export" && (last == nil || last.Status != store.RunInterrupted) {
		t.Errorf("the %s run after SIGINT: %+v; want interrupted", command, last)
	}
}

// testBinary is the rulebook command, built once for the tests that run it as
// a process of its own (real signals, a real working directory).
var testBinary struct {
	once      sync.Once
	dir, path string
	err       error
	out       []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testBinary.dir != "" {
		os.RemoveAll(testBinary.dir)
	}
	os.Exit(code)
}

// rulebookBinary builds the command on first use and returns its path;
// it skips the test under -short.
func rulebookBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	return buildBinary(t)
}

// buildBinary builds the command once for every test that runs it as a
// process of its own, and returns its path: linking it is seconds of the
// package's time, each build alike.
func buildBinary(t *testing.T) string {
	t.Helper()
	testBinary.once.Do(func() {
		if testBinary.dir, testBinary.err = os.MkdirTemp("", "rulebook-bin"); testBinary.err != nil {
			return
		}
		testBinary.path = filepath.Join(testBinary.dir, "rulebook")
		testBinary.out, testBinary.err = exec.Command("go", "build", "-o", testBinary.path, ".").CombinedOutput()
	})
	if testBinary.err != nil {
		t.Fatalf("build: %v\n%s", testBinary.err, testBinary.out)
	}
	return testBinary.path
}

// runIn runs the command with args in dir and returns its output.
func runIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(rulebookBinary(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ctrlCStops is how soon after Ctrl-C every command must have stopped.
const ctrlCStops = 2 * time.Second

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// after is an interruption point: delay after the command started, or
// delay after its output first contains text.
type after struct {
	delay time.Duration
	text  string
}

// interruptIn runs the command with args in dir, sends it a real SIGINT at
// the point at, and checks that it exits with status 130 within
// ctrlCStops. It returns the command's output.
func interruptIn(t *testing.T, dir string, at after, args ...string) string {
	t.Helper()
	cmd := exec.Command(rulebookBinary(t), args...)
	cmd.Dir = dir
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	seen := time.Now()
	for at.text != "" && !strings.Contains(out.String(), at.text) {
		select {
		case err := <-done:
			t.Fatalf("%s finished before printing %q (%v)\n%s", args[0], at.text, err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		seen = time.Now()
	}
	select {
	case err := <-done:
		t.Fatalf("%s finished before the interruption (%v)\n%s", args[0], err, out.String())
	case <-time.After(time.Until(seen.Add(at.delay))):
	}
	cmd.Process.Signal(syscall.SIGINT)
	sent := time.Now()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 {
			t.Fatalf("%s after SIGINT: %v (want exit 130)\n%s", args[0], err, out.String())
		}
		if took := time.Since(sent); took > ctrlCStops {
			t.Errorf("%s took %s to stop after SIGINT, more than %s", args[0], took, ctrlCStops)
		}
	case <-time.After(4 * ctrlCStops):
		cmd.Process.Kill()
		t.Fatalf("%s did not stop within %s of SIGINT\n%s", args[0], 4*ctrlCStops, out.String())
	}
	return out.String()
}

// TestCtrlCStopsCompare interrupts compare while it relates TASO's
// rules to a version and while it verifies them.
func TestCtrlCStopsCompare(t *testing.T) {
	dir := t.TempDir()
	runIn(t, dir, "build", "--max-ops", "2", "--no-progress")
	file := sharedAnchor(t, "taso-generator-3ops.pb")
	for _, delay := range []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond} {
		interruptIn(t, dir, after{delay: delay}, "compare", "--version", "v1", "--workers", "1", "--no-progress", file)
	}
}

// TestCtrlCStopsAxiomsCheck interrupts axioms check while Z3 looks for
// redundant axioms and while each axiom is evaluated on concrete tensors.
func TestCtrlCStopsAxiomsCheck(t *testing.T) {
	dir := t.TempDir() // no axioms/ here: the built-in set
	out := interruptIn(t, dir, after{delay: 500 * time.Millisecond, text: "consistency: consistent"}, "axioms", "check")
	if strings.Contains(out, "redundancy: ") {
		t.Errorf("interrupted after the redundancy step:\n%s", out)
	}
	out = interruptIn(t, dir, after{delay: 2 * time.Second, text: "redundancy: "}, "axioms", "check", "--timeout", "50ms")
	if strings.Contains(out, "concrete: ") {
		t.Errorf("interrupted after the concrete step:\n%s", out)
	}
}
