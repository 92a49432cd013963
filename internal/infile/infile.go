// Package infile is the one way rulebook reads a file the user names.
// Models and their external data, input tensors, machine files, rule files,
// bundles, axiom files and the ONNX Runtime library all go through it.
// Every read resolves symbolic links and refuses what is not a regular file
// before it could block. It bounds the bytes by a limit per kind of file.
// docs/design.md's package map lists it.
package infile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNotRegular: the path names a FIFO, device, socket or directory.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file holds more bytes than its kind allows.
	ErrTooLarge = errors.New("file too large")
	// ErrOutside: a name meant to stay inside a folder resolves outside it.
	ErrOutside = errors.New("outside its folder")
	// ErrNotSharedObject: a library file is not a loadable ELF shared
	// object.
	ErrNotSharedObject = errors.New("not an ELF shared object")
)

// Kind is a kind of input file; each has a name for messages and a limit
// on its size.
type Kind int

// The kinds of files rulebook reads.
const (
	Model        Kind = iota // an ONNX model (protobuf's own limit is 2 GiB)
	ExternalData             // an ONNX model's external weights file
	Tensor                   // a serialized TensorProto (run --input)
	Machine                  // a machine description (plan --machine)
	RuleFile                 // a rule file to import or compare
	Bundle                   // an exported rule version (--rules x.json)
	Axioms                   // an *.smt2 axiom file
	Library                  // a shared library (--ort-lib)
	Profile                  // a device profile of measured operator times
)

// limits and names are indexed by Kind. A machine file or an axiom file
// is text written by hand: a megabyte or a few is already absurd. Rule
// files and bundles of every released rule are a few megabytes; 256 MiB
// leaves room for TASO's largest collections. External data is read one
// tensor at a time, each bounded by its own declared size, so its limit
// only caps the file's whole size at what the runtime can address.
var kinds = [...]struct {
	name  string
	limit int64
}{
	Model:        {"ONNX model", 2 << 30},
	ExternalData: {"external data file", 1 << 40},
	Tensor:       {"tensor file", 2 << 30},
	Machine:      {"machine file", 1 << 20},
	RuleFile:     {"rule file", 256 << 20},
	Bundle:       {"rule bundle", 256 << 20},
	Axioms:       {"axiom file", 4 << 20},
	Library:      {"shared library", 4 << 30},
	Profile:      {"device profile", 16 << 20},
}

func (k Kind) String() string { return kinds[k].name }

// Limit is the most bytes a file of kind k may hold.
func (k Kind) Limit() int64 { return kinds[k].limit }

// Error says which file of which kind could not be read, and why; it
// unwraps to one of the sentinels above or to the system's error.
type Error struct {
	Path string
	Kind Kind
	Err  error
	// Detail, when set, replaces Err's text in the message.
	Detail string
}

func (e *Error) Error() string {
	why := e.Detail
	if why == "" {
		why = e.Err.Error()
	}
	return fmt.Sprintf("cannot read %s %s: %s", e.Kind, e.Path, why)
}

func (e *Error) Unwrap() error { return e.Err }

// Open opens the regular file at path (after following symbolic links)
// for reading, without blocking, and returns it with its size. It refuses
// a special file and a file larger than kind's limit. A FIFO is refused
// from its stat, before any open. The open itself does not block, and the
// opened file is checked again, so a FIFO put in its place between the
// two cannot hang the command either.
func Open(path string, kind Kind) (*os.File, int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, &Error{Path: path, Kind: kind, Err: unwrapPathError(err)}
	}
	if err := regular(path, kind, fi); err != nil {
		return nil, 0, err
	}
	// O_NONBLOCK: a FIFO swapped in after the stat opens at once instead
	// of waiting for a writer; regular files ignore the flag.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, &Error{Path: path, Kind: kind, Err: unwrapPathError(err)}
	}
	opened, err := f.Stat()
	if err == nil {
		err = regular(path, kind, opened)
	}
	if err == nil && opened.Size() > kind.Limit() {
		err = tooLarge(path, kind, opened.Size())
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, opened.Size(), nil
}

// ReadFile reads the whole regular file at path, at most kind's limit.
func ReadFile(path string, kind Kind) ([]byte, error) {
	f, size, err := Open(path, kind)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A file may grow after the stat (or, in /proc, report no size): read
	// one byte past the limit to tell.
	data := make([]byte, 0, size+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if int64(len(data)) > kind.Limit() {
			return nil, tooLarge(path, kind, int64(len(data)))
		}
		if errors.Is(err, io.EOF) {
			return data, nil
		}
		if err != nil {
			return nil, &Error{Path: path, Kind: kind, Err: unwrapPathError(err)}
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// Check reports why path could not be read as a file of kind, without
// reading it: it is Open and Close.
func Check(path string, kind Kind) error {
	f, _, err := Open(path, kind)
	if err != nil {
		return err
	}
	return f.Close()
}

func regular(path string, kind Kind, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return &Error{Path: path, Kind: kind, Err: ErrNotRegular,
		Detail: fmt.Sprintf("it is %s, not a regular file", describe(fi.Mode()))}
}

func tooLarge(path string, kind Kind, size int64) error {
	return &Error{Path: path, Kind: kind, Err: ErrTooLarge,
		Detail: fmt.Sprintf("it holds more than %s, the most a %s may hold", bytes(kind.Limit()), kind)}
}

// describe names a file type for an error message.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// bytes writes a size in the largest binary unit that divides it, or in
// bytes.
func bytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// unwrapPathError drops the *fs.PathError around err: Error names the
// path already.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
