package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrStdoutClosed is matched (errors.Is) by Stdout.Err when the command
// wrote to a standard output that was closed when it started.
var ErrStdoutClosed = errors.New("standard output is closed")

// Stdout is standard output as a command writes to it: it remembers the
// first write error (a full disk, /dev/full, a closed descriptor), which
// the command's exit status must report, since fmt.Fprintf's callers drop
// it.
type Stdout struct {
	w      io.Writer
	closed bool
	n      int64
	err    error
}

// NewStdout wraps f, standard output. A descriptor closed at start (the
// shell's >&-) is replaced by the Go runtime with /dev/null opened
// read-write, so that writes vanish without an error; NewStdout notes
// that case, which a shell's >/dev/null (write-only) is not. A /dev/null
// that a parent opened read-write on purpose (Python's
// subprocess.DEVNULL) looks the same, and is refused too once something
// is written to it.
func NewStdout(f *os.File) *Stdout {
	return &Stdout{w: f, closed: standsInForClosed(f)}
}

// Write writes p, remembering the first error.
func (s *Stdout) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil {
		s.err = err
	}
	return n, err
}

// Err is the first write error, or ErrStdoutClosed when bytes went to a
// standard output that was closed; nil when all went well.
func (s *Stdout) Err() error {
	switch {
	case s.err != nil:
		return fmt.Errorf("cannot write standard output: %w", unwrapPathError(s.err))
	case s.closed && s.n > 0:
		return fmt.Errorf("%w: %d bytes of output were lost; redirect it to a file", ErrStdoutClosed, s.n)
	}
	return nil
}

// standsInForClosed tells whether f is /dev/null opened read-write.
func standsInForClosed(f *os.File) bool {
	fi, err := f.Stat()
	null, nerr := os.Stat(os.DevNull)
	if err != nil || nerr != nil || !os.SameFile(fi, null) {
		return false
	}
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_ACCMODE == syscall.O_RDWR
}
