package infile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Each path reads or fails with the sentinel its case names; none blocks
// (a FIFO without a writer is refused from its stat) and none reads
// without bound (/dev/zero is a device; a sparse file past the limit is
// refused from its size).
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	plain := filepath.Join(dir, "machine.json")
	must(os.WriteFile(plain, []byte(`{"name":"m"}`), 0o644))
	link := filepath.Join(dir, "link.json")
	must(os.Symlink(plain, link))
	fifo := filepath.Join(dir, "fifo.json")
	must(syscall.Mkfifo(fifo, 0o644))
	fifoLink := filepath.Join(dir, "fifo-link.json")
	must(os.Symlink(fifo, fifoLink))
	sparse := filepath.Join(dir, "sparse.json")
	f, err := os.Create(sparse)
	must(err)
	must(f.Truncate(Machine.Limit() + 1))
	must(f.Close())
	atLimit := filepath.Join(dir, "limit.json")
	must(os.WriteFile(atLimit, make([]byte, Machine.Limit()), 0o644))

	for _, tc := range []struct {
		name, path string
		want       error // nil: reads
	}{
		{"regular file", plain, nil},
		{"symbolic link to a regular file", link, nil},
		{"a file at the limit", atLimit, nil},
		{"FIFO without a writer", fifo, ErrNotRegular},
		{"link to a FIFO", fifoLink, ErrNotRegular},
		{"/dev/zero", "/dev/zero", ErrNotRegular},
		{"directory", dir, ErrNotRegular},
		{"sparse file past the limit", sparse, ErrTooLarge},
		{"missing file", filepath.Join(dir, "none.json"), os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := ReadFile(tc.path, Machine)
			if tc.want == nil {
				want, _ := os.ReadFile(tc.path)
				if err != nil || string(data) != string(want) {
					t.Fatalf("ReadFile = %d bytes, %v; want the file's %d bytes", len(data), err, len(want))
				}
				return
			}
			var ie *Error
			if !errors.Is(err, tc.want) || !errors.As(err, &ie) || ie.Path != tc.path {
				t.Fatalf("ReadFile = %v; want an *Error naming %s that matches %v", err, tc.path, tc.want)
			}
		})
	}
}

// A name inside a folder may be a link that stays inside it; one that
// leaves it, directly or through a linked folder, is refused.
func TestInside(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "model")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "w.bin"), []byte("weights"), 0o644))
	must(os.WriteFile(filepath.Join(root, "secret"), []byte("secret"), 0o644))
	must(os.Symlink("w.bin", filepath.Join(dir, "alias.bin")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "passwd.bin")))
	must(os.Symlink("../secret", filepath.Join(dir, "up.bin")))
	must(os.Symlink(root, filepath.Join(dir, "out")))
	for _, tc := range []struct {
		name string
		want error
	}{
		{"w.bin", nil},
		{"alias.bin", nil},
		{"sub/../w.bin", nil},
		{"missing.bin", nil},
		{"passwd.bin", ErrOutside},
		{"up.bin", ErrOutside},
		{"out/secret", ErrOutside},
		{"../secret", ErrOutside},
		{"/etc/passwd", ErrOutside},
	} {
		_, err := Inside(dir, tc.name, ExternalData)
		if !errors.Is(err, tc.want) {
			t.Errorf("Inside(%s) = %v; want %v", tc.name, err, tc.want)
		}
	}
}

// A truncated library (libc's first 20 KB, as the hostile run used) and a
// text file are refused before any loader maps them; the system's own
// libc passes.
func TestSharedObject(t *testing.T) {
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		libc = "/lib/aarch64-linux-gnu/libc.so.6"
	}
	whole, err := os.ReadFile(libc)
	if err != nil || len(whole) < 20<<10 {
		t.Skipf("no system libc to cut: %v", err)
	}
	dir := t.TempDir()
	cut := filepath.Join(dir, "libcut.so")
	text := filepath.Join(dir, "libtext.so")
	if err := os.WriteFile(cut, whole[:20<<10], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte("not a library\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want error
	}{
		{libc, nil},
		{cut, ErrNotSharedObject},
		{text, ErrNotSharedObject},
		{dir, ErrNotRegular},
	} {
		if err := SharedObject(tc.path); !errors.Is(err, tc.want) {
			t.Errorf("SharedObject(%s) = %v; want %v", tc.path, err, tc.want)
		}
	}
}
