// Package testfiles finds the real files tests read. These are the shared
// folder beside the repository (ONNX models, TASO's and FlexFlow's rule
// files) and ONNX's node tests from Debian's libonnx-testdata. It also
// exports torchvision classifiers with PyTorch for the tests that run them.
// docs/design.md's package map lists it.
package testfiles

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SharedDir is $RULEBOOK_SHARED, or the shared folder beside the
// repository that holds the calling test's package.
func SharedDir() string {
	if d := os.Getenv("RULEBOOK_SHARED"); d != "" {
		return d
	}
	root, ok := repoRoot()
	if !ok {
		return filepath.Join("..", "shared")
	}
	return filepath.Join(root, "..", "shared")
}

// repoRoot is the folder of go.mod at or above the working directory.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Shared returns the path of a file in the shared folder, e.g.
// Shared(t, "models", "resnet50.onnx"). A missing file skips the test,
// except in CI, where the shared folder is always beside the clone.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	path := filepath.Join(append([]string{SharedDir()}, elem...)...)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		Missing(t, "%s not present", path)
	}
	return path
}

// Missing skips the test for an absent shared file, or fails it in CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format+" (CI expects ../shared beside the repository)", args...)
	}
	t.Skipf(format+" (set RULEBOOK_SHARED to the shared folder)", args...)
}

// nodeTestDirs are where packages install ONNX's node tests.
var nodeTestDirs = []string{
	"/usr/share/libonnx-testdata/data/node",
	"/usr/share/onnx/testdata/node",
	"/usr/share/onnx/backend/test/data/node",
	"/usr/local/share/libonnx-testdata/data/node",
}

// ONNXNodeTests returns the directory holding ONNX's node/test_* cases.
// When none is installed the test is skipped, or failed in CI, which
// installs libonnx-testdata.
func ONNXNodeTests(t testing.TB) string {
	t.Helper()
	dir, err := FindONNXNodeTests()
	if err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		msg := "ONNX node test data not found in " + strings.Join(nodeTestDirs, ", ") +
			"; install it with `apt-get install libonnx-testdata` or set RULEBOOK_ONNX_TESTDATA"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// FindONNXNodeTests returns the directory holding ONNX's node/test_*
// cases, or "" when none is installed. RULEBOOK_ONNX_TESTDATA may name that
// directory or a parent of it; naming one without cases is an error.
func FindONNXNodeTests() (string, error) {
	hasCases := func(dir string) bool {
		m, _ := filepath.Glob(filepath.Join(dir, "test_*", "model.onnx"))
		return len(m) > 0
	}
	if env := os.Getenv("RULEBOOK_ONNX_TESTDATA"); env != "" {
		for _, d := range []string{env, filepath.Join(env, "node"), filepath.Join(env, "data", "node")} {
			if hasCases(d) {
				return d, nil
			}
		}
		return "", fmt.Errorf("RULEBOOK_ONNX_TESTDATA=%s holds no test_*/model.onnx (directly, in node/ or in data/node/)", env)
	}
	for _, d := range nodeTestDirs {
		if hasCases(d) {
			return d, nil
		}
	}
	return "", nil
}
