package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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

// startedQuiet is how long an example's last command, once it has printed
// something, may stay quiet before the test stops it the same way: it got
// past its arguments and inputs, which every command checks before its
// work (and before it prints), and is at the long work itself, which
// writes a line as each stage begins. The commands of a script before its
// last run to the deadline, since a later one must still be checked.
const startedQuiet = 5 * time.Second

// lastCommand is the line a script writes as its last command begins.
const lastCommand = "# example: last command"

// watched is an example's output, with when it last grew.
type watched struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	last time.Time
	// lastBegun is when the last command began: at once for a single
	// command, at lastCommand's line for a script.
	lastBegun, script bool
}

func (w *watched) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if w.script && !w.lastBegun && bytes.Contains(w.buf.Bytes(), []byte(lastCommand)) {
		w.lastBegun = true
		w.last = time.Time{} // the last command has printed nothing yet
		return n, err
	}
	w.last = time.Now()
	return n, err
}

// atWork reports whether the example's last command has printed and then
// stayed quiet for startedQuiet.
func (w *watched) atWork() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return (w.lastBegun || !w.script) && !w.last.IsZero() && time.Since(w.last) >= startedQuiet
}

func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

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
	// tracked are the repository's files under version control, relative
	// to repo: a sandbox holds copies of these and nothing else.
	tracked []string
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
	fx := fixture{bin: buildBinary(t), db: filepath.Join(dir, "rulebook.db"),
		bundle: filepath.Join(dir, "v1.json"), repo: repo, shared: shared, tracked: trackedFiles(t, repo)}
	for _, args := range [][]string{
		{"build", "--max-ops", "3", "--tag", "v1", "--no-progress"},
		{"release", "v2"},
		{"export", "--version", "v1", "--format", "json", "-o", fx.bundle},
	} {
		cmd := exec.Command(fx.bin, append([]string{"--db", fx.db}, args...)...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("fixture: rulebook %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if args[0] == "build" {
			// The README's sample of this build must be what it prints.
			checkReadmeSample(t, "rulebook build --max-ops 3", string(out))
		}
	}
	return fx
}

// trackedFiles lists the files git tracks in repo, those a fresh clone
// has: what a user's examples leave in the working copy (plan.json,
// rulebook.db and its -wal/-shm) is not among them.
func trackedFiles(t *testing.T, repo string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("the examples run in a copy of the files git tracks, and git ls-files failed in %s: %v", repo, err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" && !strings.HasPrefix(f, ".") {
			files = append(files, f)
		}
	}
	return files
}

// sandbox makes a working folder laid out like the repository beside the
// shared folder: copies of the repository's tracked files, so that paths
// such as axioms/ and ../shared/models/x.onnx resolve, what an example
// writes lands in the sandbox and never in the repository, and files a
// user left in the working copy are not seen. It holds rulebook.db and
// other.db (both with v1 and v2), v1.json and my-axioms/ (the axioms), as
// the examples expect.
func (fx fixture) sandbox(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "repo")
	if err := os.Symlink(fx.shared, filepath.Join(root, "shared")); err != nil {
		t.Fatal(err)
	}
	for _, f := range fx.tracked {
		from := filepath.Join(fx.repo, f)
		if st, err := os.Lstat(from); err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working copy, or not a plain file
		}
		copyFile(t, from, filepath.Join(work, f))
		if rest, ok := strings.CutPrefix(f, "axioms/"); ok {
			copyFile(t, from, filepath.Join(work, "my-axioms", rest))
		}
	}
	copyFile(t, fx.db, filepath.Join(work, "rulebook.db"))
	copyFile(t, fx.db, filepath.Join(work, "other.db"))
	copyFile(t, fx.bundle, filepath.Join(work, "v1.json"))
	return work
}

// copyFile copies from to a new file to, making its folder.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
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
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), exampleDeadline)
	defer cancel()
	script := strings.HasPrefix(line, "set -e\n")
	if script {
		i := strings.LastIndex(line, "\n")
		line = line[:i] + "\necho '" + lastCommand + "'" + line[i:]
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(fx.bin)+":"+os.Getenv("PATH"), "RULEBOOK_DB=rulebook.db")
	// The example runs in its own process group, so that Ctrl-C at the
	// deadline reaches rulebook itself and not only bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	out := &watched{script: script}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if ctx.Err() != nil {
				t.Logf("still running after %s, stopped: counted as started without error", time.Since(started).Round(time.Second))
				return
			}
			if err != nil {
				t.Errorf("%s: %v\n%s", line, err, lastLines(out.String(), 15))
			}
			return
		case <-tick.C:
			if out.atWork() {
				cancel()
			}
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
