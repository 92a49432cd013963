package ort

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// LibraryEnv is the environment variable that names the library file.
const LibraryEnv = "ONNXRUNTIME_LIB"

// PipPackage is the PyPI package that carries the library, at the version
// CI installs (scripts/requirements-bridge.txt); any release from 1.24 on
// serves the API version the binding asks for.
const PipPackage = "onnxruntime==1.32.0"

// Search says where to look for the library, in order: an explicit path
// (the --ort-lib flag), else the environment variable's path, else the
// onnxruntime package of a Python interpreter, then directories. An
// explicit path or the variable is taken alone: it is what the user
// asked for, and finding another library instead would hide their
// mistake.
type Search struct {
	// Path is a library file given on the command line; "" when none.
	Path string
	// Env is the value of LibraryEnv; "" when unset.
	Env string
	// Python is the interpreter asked where its onnxruntime package is
	// (pip installs the library in its capi folder); "" skips it.
	Python string
	// Dirs are searched last, for libonnxruntime.so or a versioned name.
	Dirs []string
}

// DefaultSearch looks at path, then LibraryEnv, python3's onnxruntime
// package, LD_LIBRARY_PATH and the usual library directories.
func DefaultSearch(path string) Search {
	dirs := filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))
	dirs = append(dirs, "/usr/local/lib", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu")
	return Search{Path: path, Env: os.Getenv(LibraryEnv), Python: "python3", Dirs: dirs}
}

// NotFoundError says where the library was looked for and how to get it,
// in one line.
type NotFoundError struct {
	Looked []string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("the ONNX Runtime library was not found (looked in %s); install it with %q or point %s at libonnxruntime.so",
		strings.Join(e.Looked, ", "), "pip install "+PipPackage, LibraryEnv)
}

// Find returns the path of the library, or a *NotFoundError.
func (s Search) Find(ctx context.Context) (string, error) {
	switch {
	case s.Path != "":
		return explicit(s.Path, "--ort-lib "+s.Path)
	case s.Env != "":
		return explicit(s.Env, LibraryEnv+"="+s.Env)
	}
	var looked []string
	dirs := slices.Clone(s.Dirs)
	if s.Python != "" {
		if dir := pythonCapiDir(ctx, s.Python); dir != "" {
			dirs = append([]string{dir}, dirs...)
		} else {
			looked = append(looked, s.Python+"'s onnxruntime package (not installed)")
		}
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		if lib := libraryIn(dir); lib != "" {
			return lib, nil
		}
		looked = append(looked, dir)
	}
	if len(looked) == 0 {
		looked = append(looked, "nowhere: the search is empty")
	}
	return "", &NotFoundError{Looked: looked}
}

// explicit accepts a named library file that exists.
func explicit(path, where string) (string, error) {
	st, err := os.Stat(path)
	if err == nil && !st.IsDir() {
		return path, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	return "", &NotFoundError{Looked: []string{where}}
}

// libraryIn returns the library in dir: the unversioned name, else the
// last versioned one in lexical order; "" when there is none.
func libraryIn(dir string) string {
	plain := filepath.Join(dir, "libonnxruntime.so")
	if _, err := os.Stat(plain); err == nil {
		return plain
	}
	versioned, _ := filepath.Glob(filepath.Join(dir, "libonnxruntime.so.*"))
	if len(versioned) == 0 {
		return ""
	}
	return versioned[len(versioned)-1]
}

// pythonCapiDir asks python for the folder pip puts the library in,
// without importing the package (which would load numpy and the library
// itself); "" when python or the package is missing.
func pythonCapiDir(ctx context.Context, python string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	const script = `import importlib.util, os
s = importlib.util.find_spec("onnxruntime")
print(os.path.join(list(s.submodule_search_locations)[0], "capi") if s and s.submodule_search_locations else "")`
	out, err := exec.CommandContext(ctx, python, "-c", script).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
