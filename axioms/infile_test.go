package axioms

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"rulebook/internal/infile"
	"rulebook/rules"
)

// An axiom folder read through the input layer: a FIFO named x.smt2 is
// refused at once (it hung Load, which waited for a writer).
func TestLoadRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "a.smt2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, rules.Default()); !errors.Is(err, infile.ErrNotRegular) {
		t.Errorf("Load(folder with a FIFO) = %v; want infile.ErrNotRegular", err)
	}
	if err := os.Remove(filepath.Join(dir, "a.smt2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "z.smt2")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, rules.Default()); !errors.Is(err, infile.ErrNotRegular) {
		t.Errorf("Load(folder with a link to /dev/zero) = %v; want infile.ErrNotRegular", err)
	}
}
