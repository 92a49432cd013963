package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The examples' sandbox holds copies of the tracked files only (issue 25:
// plan.json, v1.json and rulebook.db that the README's examples left in
// the repository root were linked in and broke TestHelpExamples, and an
// example rewrote v1.json through its link): files a user left in the
// working copy are not seen, and writing in the sandbox leaves the
// repository as it was.
func TestSandboxCopiesOnlyTrackedFiles(t *testing.T) {
	repo, dir := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		t.Helper()
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(text), 0o644))
	}
	write(filepath.Join(repo, "README.md"), "readme")
	write(filepath.Join(repo, "axioms", "a.smt2"), "axiom")
	write(filepath.Join(repo, "axioms", "testdata", "wrong", "b.smt2"), "wrong")
	git := exec.Command("git", "init", "-q")
	git.Dir = repo
	if out, err := git.CombinedOutput(); err != nil {
		t.Skipf("git init: %v\n%s", err, out)
	}
	git = exec.Command("git", "add", ".")
	git.Dir = repo
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git add: %v\n%s", err, out)
	}
	for _, f := range []string{"plan.json", "v1.json", "rulebook.db", "rulebook.db-wal", "rulebook.db-shm"} {
		write(filepath.Join(repo, f), "left by the user")
	}
	write(filepath.Join(dir, "fixture.db"), "fixture database")
	write(filepath.Join(dir, "fixture.json"), "fixture bundle")
	fx := fixture{db: filepath.Join(dir, "fixture.db"), bundle: filepath.Join(dir, "fixture.json"), repo: repo, shared: dir,
		tracked: trackedFiles(t, repo)}
	work := fx.sandbox(t)

	want := map[string]string{
		"README.md": "readme", "axioms/a.smt2": "axiom", "axioms/testdata/wrong/b.smt2": "wrong", "my-axioms/a.smt2": "axiom",
		"rulebook.db": "fixture database", "other.db": "fixture database", "v1.json": "fixture bundle",
	}
	got := map[string]string{}
	must(t, filepath.WalkDir(work, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(work, path)
		if d.Type()&fs.ModeSymlink != 0 {
			t.Errorf("%s is a link: writing it would write into the repository", rel)
			return nil
		}
		b, err := os.ReadFile(path)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	}))
	for f, text := range want {
		if got[f] != text {
			t.Errorf("%s holds %q, want %q", f, got[f], text)
		}
	}
	for f := range got {
		if _, ok := want[f]; !ok && f != "my-axioms/testdata/wrong/b.smt2" {
			t.Errorf("the sandbox holds %s, which is not tracked", f)
		}
	}
	write(filepath.Join(work, "README.md"), "changed by an example")
	if b, _ := os.ReadFile(filepath.Join(repo, "README.md")); string(b) != "readme" {
		t.Errorf("writing the sandbox's README.md changed the repository's: %q", b)
	}
}
