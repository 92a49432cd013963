package outfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A new file appears whole with mode 0644; a replaced one gets the new
// contents and keeps its mode; a failing writer leaves the old file; no
// temporary file is left behind.
func TestWriteRegularFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "v1.json")
	if err := Write(path, writeString("first")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", st.Mode().Perm())
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error { io.WriteString(w, "partial"); return boom })
	if data, _ := os.ReadFile(path); err != boom || string(data) != "first" {
		t.Errorf("a failed write: %v, file %q", err, data)
	}
	if err := Write(path, writeString("second")); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if string(data) != "second" || st.Mode().Perm() != 0o600 {
		t.Errorf("replaced file %q, mode %v; want \"second\", 0600", data, st.Mode().Perm())
	}
	if got := names(t, dir); !slices.Equal(got, []string{"v1.json"}) {
		t.Errorf("folder holds %v", got)
	}
	t.Chdir(dir)
	if err := Write("relative.txt", writeString("x")); err != nil {
		t.Fatal(err)
	}
}

// Everything but a regular file or a new name is refused by Write and by
// Check with one line naming the path, and nothing changes: the device, the
// FIFO, the link and its target, the directory and the folder around them.
func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.json")
	mustWrite(t, target, "kept")
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling.json")
	if err := os.Symlink(filepath.Join(dir, "absent.json"), dangling); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"/dev/full": "a device", fifo: "a FIFO", link: "a symbolic link", dangling: "a symbolic link", sub: "a directory"}
	before := names(t, dir)
	for path, what := range cases {
		modeBefore := lstatMode(t, path)
		for name, try := range map[string]func() error{
			"Write": func() error { return Write(path, writeString("new")) },
			"Check": func() error { return Check(path) },
		} {
			err := try()
			if err == nil {
				t.Fatalf("%s(%s) succeeded", name, path)
			}
			msg := err.Error()
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(msg, path) || !strings.Contains(msg, what) || strings.Contains(msg, "\n") {
				t.Errorf("%s(%s): %q; want one line naming the path and %q", name, path, msg, what)
			}
			if got := lstatMode(t, path); got != modeBefore {
				t.Errorf("%s(%s) changed its type from %v to %v", name, path, modeBefore, got)
			}
		}
	}
	if got := names(t, dir); !slices.Equal(got, before) {
		t.Errorf("folder held %v, now %v", before, got)
	}
	if data, _ := os.ReadFile(target); string(data) != "kept" {
		t.Errorf("the link's target now holds %q", data)
	}
	if got := names(t, sub); len(got) != 0 {
		t.Errorf("the directory now holds %v", got)
	}
}

// A new name in a missing folder is refused, naming the path, as missing.
func TestMissingFolder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "no", "such", "out.json")
	for _, err := range []error{Write(path, writeString("x")), Check(path)} {
		if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Errorf("error %v: want one naming %s as missing", err, path)
		}
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("folder holds %v", got)
	}
	file := filepath.Join(dir, "file")
	mustWrite(t, file, "x")
	if err := Write(filepath.Join(file, "out.json"), writeString("x")); err == nil || !strings.Contains(err.Error(), "not a directory") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a path through a file: %v", err)
	}
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func lstatMode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Type()
}
