package infile

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
)

// Inside returns the path of name, a relative path inside dir, with every
// symbolic link resolved, and refuses a name that resolves outside dir
// (as ONNX's checker does for external data): a link in a model's folder
// must not make the model read /etc/passwd. A name that does not exist is
// returned unresolved, for Open to report.
func Inside(dir, name string, kind Kind) (string, error) {
	path := filepath.Join(dir, name)
	outside := &Error{Path: path, Kind: kind, Err: ErrOutside,
		Detail: fmt.Sprintf("%q must name a file inside %s, and resolves outside it", name, dir)}
	if !filepath.IsLocal(name) {
		return "", outside
	}
	root, err := resolve(dir)
	if err != nil {
		return "", &Error{Path: dir, Kind: kind, Err: unwrapPathError(err)}
	}
	target, err := resolve(path)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil
	}
	if err != nil {
		return "", &Error{Path: path, Kind: kind, Err: unwrapPathError(err)}
	}
	rel, err := filepath.Rel(root, target)
	if err != nil || !filepath.IsLocal(rel) {
		return "", outside
	}
	return target, nil
}

// resolve is the absolute path of p with every symbolic link resolved.
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// elfMachine is this process's ELF machine (a library for another one
// cannot load); 0 where this list does not know the architecture.
func elfMachine() elf.Machine {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64
	case "arm64":
		return elf.EM_AARCH64
	case "386":
		return elf.EM_386
	case "riscv64":
		return elf.EM_RISCV
	case "ppc64le":
		return elf.EM_PPC64
	case "s390x":
		return elf.EM_S390
	}
	return 0
}

// SharedObject checks, before a library is loaded, what can be checked
// without running it: path is a regular file within Library's limit, an
// ELF shared object of this machine's class and architecture, and every
// segment and section it declares lies inside the file. A truncated
// library would otherwise be mapped past its end and die with SIGBUS
// inside the loader. What it cannot check is the code itself: a library
// damaged inside those bounds, or replaced while it loads, can still
// crash the process.
func SharedObject(path string) error {
	f, size, err := Open(path, Library)
	if err != nil {
		return err
	}
	defer f.Close()
	bad := func(format string, args ...any) error {
		return &Error{Path: path, Kind: Library, Err: ErrNotSharedObject, Detail: fmt.Sprintf(format, args...)}
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return bad("not an ELF shared object (%v)", err)
	}
	want := elf.ELFCLASS64
	if runtime.GOARCH == "386" || runtime.GOARCH == "arm" {
		want = elf.ELFCLASS32
	}
	switch {
	case ef.Type != elf.ET_DYN:
		return bad("an ELF file of type %s, not a shared object (ET_DYN)", ef.Type)
	case ef.Class != want:
		return bad("an ELF file of class %s; this process needs %s", ef.Class, want)
	case elfMachine() != 0 && ef.Machine != elfMachine():
		return bad("built for %s, not for this machine (%s)", ef.Machine, runtime.GOARCH)
	}
	for i, p := range ef.Progs {
		if p.Off > uint64(size) || p.Filesz > uint64(size)-p.Off {
			return bad("segment %d ends at byte %d, past the file's end at %d: the file is truncated", i, p.Off+p.Filesz, size)
		}
	}
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_NOBITS {
			continue
		}
		if s.Offset > uint64(size) || s.FileSize > uint64(size)-s.Offset {
			return bad("section %s ends at byte %d, past the file's end at %d: the file is truncated", s.Name, s.Offset+s.FileSize, size)
		}
	}
	return nil
}
