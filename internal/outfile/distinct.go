package outfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrIsInput is matched (errors.Is) by Distinct's error for an output that
// is one of the command's inputs, or another of its outputs.
var ErrIsInput = errors.New("output is an input")

// Named is a file a command reads or writes, with how a message names its
// role ("the model", "--report").
type Named struct{ Path, Role string }

// Database names the files of the SQLite database at path: the file and
// the side files SQLite keeps beside it. Writing over any of them would
// damage the database.
func Database(path string) []Named {
	return []Named{
		{path, "the database"},
		{path + "-wal", "the database's write-ahead log"},
		{path + "-shm", "the database's shared-memory file"},
		{path + "-journal", "the database's journal"},
	}
}

// Distinct refuses, before any work starts, an output that is one of the
// inputs or an earlier output: the same path, a path through a symbolic
// link to it, or a hard link to the same file. Outputs that do not exist
// yet are compared by their resolved paths. Inputs with an empty path
// are skipped.
func Distinct(inputs, outputs []Named) error {
	for i, out := range outputs {
		if out.Path == "" {
			continue
		}
		others := append(append([]Named(nil), inputs...), outputs[:i]...)
		for _, in := range others {
			if in.Path != "" && sameFile(out.Path, in.Path) {
				return &isInputError{out, in}
			}
		}
	}
	return nil
}

// isInputError reads "cannot write m.onnx (-o): it is the model m.onnx;
// name another file" and matches ErrIsInput.
type isInputError struct{ out, in Named }

func (e *isInputError) Error() string {
	same := ""
	if filepath.Clean(e.out.Path) != filepath.Clean(e.in.Path) {
		same = ", the same file"
	}
	return fmt.Sprintf("cannot write %s (%s): it is %s %s%s; name another file", e.out.Path, e.out.Role, e.in.Role, e.in.Path, same)
}

func (e *isInputError) Unwrap() error { return ErrIsInput }

// sameFile tells whether a and b name one file: by device and inode when
// both exist (which catches symbolic and hard links), else by their
// resolved paths.
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	return resolved(a, 0) == resolved(b, 0)
}

// resolved is path made absolute with its symbolic links resolved as far
// as they lead to existing files: the folder's, and the name's own when
// it is a link to a file not yet there.
func resolved(path string, depth int) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if full, err := filepath.EvalSymlinks(abs); err == nil {
		return full
	}
	dir, base := filepath.Split(abs)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	abs = filepath.Join(dir, base)
	// A dangling link names the file a write would create.
	if target, err := os.Readlink(abs); err == nil && depth < 40 {
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		return resolved(target, depth+1)
	}
	return abs
}
