package ort

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rulebook/internal/infile"
)

// TestFindLibrary looks for the library where it is and where it is not:
// a missing library is one line that says where the search looked and
// how to get the library.
func TestFindLibrary(t *testing.T) {
	empty := t.TempDir()
	withLib := t.TempDir()
	versioned := filepath.Join(withLib, "libonnxruntime.so.1.32.0")
	if err := os.WriteFile(versioned, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(empty, "libonnxruntime.so")
	cases := []struct {
		name   string
		search Search
		found  string
		looked string // in the error when nothing is found
	}{
		{"flag names a missing file", Search{Path: missing, Dirs: []string{withLib}}, "", "--ort-lib " + missing},
		{"variable names a missing file", Search{Env: missing, Dirs: []string{withLib}}, "", LibraryEnv + "=" + missing},
		{"flag before variable", Search{Path: versioned, Env: missing}, versioned, ""},
		{"variable names the file", Search{Env: versioned}, versioned, ""},
		{"search disabled", Search{}, "", "nowhere: the search is empty"},
		{"not in the directories", Search{Dirs: []string{empty}}, "", empty},
		{"python without the package", Search{Python: filepath.Join(empty, "python3"), Dirs: []string{empty}}, "", filepath.Join(empty, "python3") + "'s onnxruntime package (not installed), " + empty},
		{"a versioned name in a directory", Search{Dirs: []string{empty, withLib}}, versioned, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.search.Find(context.Background())
			if c.found != "" {
				if err != nil || got != c.found {
					t.Fatalf("Find = %q, %v; want %q", got, err, c.found)
				}
				return
			}
			var nf *NotFoundError
			if !errors.As(err, &nf) {
				t.Fatalf("Find = %q, %v; want a NotFoundError", got, err)
			}
			msg := err.Error()
			want := "the ONNX Runtime library was not found (looked in " + c.looked + `); install it with "pip install onnxruntime==1.32.0" or point ONNXRUNTIME_LIB at libonnxruntime.so`
			if msg != want || strings.Contains(msg, "\n") {
				t.Errorf("message\n%s\nwant\n%s", msg, want)
			}
		})
	}
}

// A damaged library (libc's first 20 KB, as the hostile run used) is
// refused before dlopen maps it, where it died with SIGBUS.
func TestLoadRefusesDamagedLibrary(t *testing.T) {
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		libc = "/lib/aarch64-linux-gnu/libc.so.6"
	}
	whole, err := os.ReadFile(libc)
	if err != nil || len(whole) < 20<<10 {
		t.Skipf("no system libc to cut: %v", err)
	}
	cut := filepath.Join(t.TempDir(), "libonnxruntime.so")
	if err := os.WriteFile(cut, whole[:20<<10], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Load(cut); !errors.Is(err, infile.ErrNotSharedObject) || !strings.Contains(err.Error(), cut) {
		t.Errorf("Load(first 20 KB of libc) = %v; want an error naming the file that matches infile.ErrNotSharedObject", err)
	}
}
