// Package outfile writes the files rulebook produces (exports, models,
// reports, pictures) so that nothing is written where it should not be. A
// path must name a regular file or a new name in an existing folder. A
// device, a FIFO, a socket, a symbolic link or a directory is refused before
// anything is written. The file appears only once it is complete.
// docs/design.md's package map lists it.
package outfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is matched (errors.Is) by the error for a path that names
// something other than a regular file.
var ErrNotRegular = errors.New("not a regular file")

// newFileMode is the mode of a file that did not exist before; a replaced
// file keeps its own.
const newFileMode = 0o644

// Write creates or replaces the regular file at path with what write
// produces. The bytes go to a temporary file in the same folder, which is
// synced and renamed over path, so path holds either what it held before
// or the whole new contents; on failure the temporary file is removed.
func Write(path string, write func(io.Writer) error) (err error) {
	perm, err := target(path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, unwrapPathError(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, unwrapPathError(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, unwrapPathError(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, unwrapPathError(err))
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, unwrapLinkError(err))
	}
	syncDir(dir)
	return nil
}

// Check reports why Write could not write path, without changing anything
// visible: commands call it before long work, so that a bad output path
// fails at once. It creates and removes a temporary file to learn whether
// the folder is writable.
func Check(path string) error {
	if _, err := target(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".rulebook-check-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, unwrapPathError(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// target checks what path names and returns the mode the written file
// gets: a regular file's own, or newFileMode for a new name. Anything
// else is refused rather than replaced by a regular file or written
// through. Rename would replace a device node such as /dev/full, or a
// symbolic link, itself.
func target(path string) (fs.FileMode, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return newFileMode, checkFolder(path)
	case err != nil:
		return 0, fmt.Errorf("cannot write %s: %w", path, unwrapPathError(err))
	case fi.Mode().IsRegular():
		return fi.Mode().Perm(), nil
	}
	return 0, &notRegularError{path, describe(fi.Mode())}
}

// notRegularError reads "cannot write /dev/full: it is a device, not a
// regular file; …" and matches ErrNotRegular.
type notRegularError struct{ path, what string }

func (e *notRegularError) Error() string {
	return fmt.Sprintf("cannot write %s: it is %s, not a regular file; name a regular file or a new one", e.path, e.what)
}

func (e *notRegularError) Unwrap() error { return ErrNotRegular }

// checkFolder reports a missing folder for a new name. (A path through
// a file fails Lstat with "not a directory" already.)
func checkFolder(path string) error {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("cannot write %s: folder %s: %w", path, dir, unwrapPathError(err))
	}
	return nil
}

// describe names a file type for an error message.
func describe(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "something else"
}

// syncDir makes a rename durable where the platform allows; the file is
// already in place, so a failure is not reported.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// unwrapPathError drops the *fs.PathError around err, whose message would
// repeat a temporary file's name.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// unwrapLinkError drops the *os.LinkError around a failed rename.
func unwrapLinkError(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
