package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"rulebook/internal/testfiles"
)

// exampleDeadline is how long an example may run before the test stops it
// with Ctrl-C and counts it as started without error: the ≤4-operator
// build in an example takes minutes, which would only repeat what other
// tests check.
const exampleDeadline = 20 * time.Second

// TestHelpExamples runs every example in every command's --help and every
// rulebook command line of README.md, the way a newcomer would paste it:
// with bash, from a copy of the repository beside the shared folder, on a
// ≤3-operator rulebook with versions v1 and v2 and the bundle v1.json. An
// example fails the test if it exits with an error before the deadline.
func TestHelpExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every example of the help texts and the README; skipped with -short")
	}
	shared := testfiles.SharedDir()
	if _, err := os.Stat(filepath.Join(shared, "models")); err != nil {
		testfiles.Missing(t, "%s has no models", shared)
	}
	fixture := exampleFixture(t, shared)
	examples := append(helpExamples(newRootCmd()), readmeExamples(t)...)
	if len(examples) < 15 {
		t.Fatalf("found only %d examples", len(examples))
	}
	for _, ex := range examples {
		t.Run(ex.where, func(t *testing.T) {
			t.Parallel()
			runExample(t, fixture, ex.line)
		})
	}
}

// example is one command line and where it was written.
type example struct{ where, line string }

// helpExamples lists the examples of every command, depth first. A
// command's examples run as one script, in order, since a later line may
// use what an earlier one made (a database, an exported bundle).
func helpExamples(cmd *cobra.Command) []example {
	var out []example
	var lines []string
	for _, line := range strings.Split(cmd.Example, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) > 0 {
		out = append(out, example{where: cmd.CommandPath(), line: "set -e\n" + strings.Join(lines, "\n")})
	}
	for _, sub := range cmd.Commands() {
		out = append(out, helpExamples(sub)...)
	}
	return out
}

// readmeExamples lists the rulebook command lines of README.md's code
// blocks, prompts and comments stripped.
func readmeExamples(t *testing.T) []example {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []example
	inBlock := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		for strings.HasSuffix(line, "\\") && sc.Scan() {
			line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(sc.Text())
			n++
		}
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
		if !inBlock || !strings.HasPrefix(line, "rulebook ") {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		out = append(out, example{where: fmt.Sprintf("README.md:%d: %s", n, line), line: line})
	}
	return out
}

// fixture is what every example starts from: the rulebook binary, a
// database and a bundle, and the repository to copy.
type fixture struct {
	bin, db, bundle, repo, shared string
}

// exampleFixture builds the binary and a ≤3-operator rulebook released as
// v1 and v2, with v1 exported as a bundle.
func exampleFixture(t *testing.T, shared string) fixture {
	t.Helper()
	dir := t.TempDir()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fx := fixture{bin: filepath.Join(dir, "bin", "rulebook"), db: filepath.Join(dir, "rulebook.db"),
		bundle: filepath.Join(dir, "v1.json"), repo: repo, shared: shared}
	build := exec.Command("go", "build", "-o", fx.bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"build", "--max-ops", "3", "--tag", "v1", "--no-progress"},
		{"release", "v2"},
		{"export", "--version", "v1", "--format", "json", "-o", fx.bundle},
	} {
		cmd := exec.Command(fx.bin, append([]string{"--db", fx.db}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fixture: rulebook %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return fx
}

// sandbox makes a working folder laid out like the repository beside the
// shared folder: the repository's entries are linked in, so that paths
// such as axioms/ and ../shared/models/x.onnx resolve, and what an example
// writes lands in the sandbox. It holds rulebook.db and other.db (both
// with v1 and v2), v1.json and my-axioms/ (the axioms), as the examples
// expect.
func (fx fixture) sandbox(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "repo")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fx.shared, filepath.Join(root, "shared")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(fx.repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && !strings.HasSuffix(e.Name(), ".db") {
			if err := os.Symlink(filepath.Join(fx.repo, e.Name()), filepath.Join(work, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyFile(t, fx.db, filepath.Join(work, "rulebook.db"))
	copyFile(t, fx.db, filepath.Join(work, "other.db"))
	copyFile(t, fx.bundle, filepath.Join(work, "v1.json"))
	if err := os.Symlink(filepath.Join(fx.repo, "axioms"), filepath.Join(work, "my-axioms")); err != nil {
		t.Fatal(err)
	}
	return work
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// placeholder matches the parts of an example a reader fills in.
var placeholder = regexp.MustCompile(`\b(ID|MODEL|TAG|FILE|DIR)\b`)

// runExample runs one line with bash in a fresh sandbox, with the built
// binary first on the PATH and the database in the sandbox.
func runExample(t *testing.T, fx fixture, line string) {
	if placeholder.MatchString(line) {
		t.Skipf("a template for the reader to fill in: %s", line)
	}
	work := fx.sandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), exampleDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(fx.bin)+":"+os.Getenv("PATH"), "RULEBOOK_DB=rulebook.db")
	// The example runs in its own process group, so that Ctrl-C at the
	// deadline reaches rulebook itself and not only bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Logf("still running after %s, stopped: counted as started without error", exampleDeadline)
		return
	}
	if err != nil {
		t.Errorf("%s: %v\n%s", line, err, lastLines(string(out), 15))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
