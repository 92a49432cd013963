package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"rulebook/internal/testfiles"
)

// readOnlySharedCopy copies the named files of the shared folder (paths
// relative to it, such as "models/resnet50.onnx") into a fresh folder,
// keeping their layout, makes the copy read-only and returns its root.
// Commands given files from it must write nothing there.
func readOnlySharedCopy(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(testfiles.Shared(t, filepath.FromSlash(f)))
		must(t, err)
		dst := filepath.Join(root, filepath.FromSlash(f))
		must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		must(t, os.WriteFile(dst, data, 0o444))
	}
	setTreeMode(t, root, 0o555)
	// Writable again before TempDir's cleanup removes it.
	t.Cleanup(func() { setTreeMode(t, root, 0o755) })
	return root
}

// setTreeMode sets the mode of every folder under root.
func setTreeMode(t *testing.T, root string, mode fs.FileMode) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(path, mode)
		}
		return err
	})
	must(t, err)
}

// folderDigest is every entry under root with its mode and, for files,
// the hash of its contents: two digests differ if anything was written,
// removed, renamed or chmodded there.
func folderDigest(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		entry := info.Mode().String()
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			entry += fmt.Sprintf(" %x", sha256.Sum256(data))
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = entry
		return nil
	})
	must(t, err)
	return out
}

// runElsewhereLeavingUnchanged runs the command with args in a fresh,
// empty working directory and fails the test if anything under folder
// changed. It returns the working directory, where default outputs
// belong, and the command's output. Arguments that name files under
// folder must be absolute.
func runElsewhereLeavingUnchanged(t *testing.T, folder string, args ...string) (workdir, out string) {
	t.Helper()
	before := folderDigest(t, folder)
	workdir = t.TempDir()
	t.Chdir(workdir)
	out, err := run(context.Background(), args...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	if after := folderDigest(t, folder); !maps.Equal(before, after) {
		var changed []string
		for name := range mapsUnion(before, after) {
			if before[name] != after[name] {
				changed = append(changed, name)
			}
		}
		slices.Sort(changed)
		t.Errorf("%v changed %s: %v", args, folder, changed)
	}
	return workdir, out
}

func mapsUnion(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestOptimizeWritesNothingBesideItsInput runs optimize with default
// outputs on a model in a read-only copy of the shared folder, from
// another working directory: the folder stays byte for byte as it was,
// and the model and report land in the working directory.
func TestOptimizeWritesNothingBesideItsInput(t *testing.T) {
	shared := readOnlySharedCopy(t, "models/squeezenet1_1.onnx")
	bundle, err := filepath.Abs("../../optimizer/testdata/rules-3ops.json")
	must(t, err)
	model := filepath.Join(shared, "models", "squeezenet1_1.onnx")
	workdir, out := runElsewhereLeavingUnchanged(t, shared, "optimize", model, "--rules", bundle, "--budget", "2", "--no-progress")
	for _, name := range []string{"squeezenet1_1.opt.onnx", "squeezenet1_1.opt.json"} {
		if _, err := os.Stat(filepath.Join(workdir, name)); err != nil {
			t.Errorf("default output %s is not in the working directory: %v\n%s", name, err, out)
		}
	}
}

// TestExportWritesNothingUnasked exports with default flags, and imports
// and compares files of a read-only copy of the shared folder, from
// another working directory: export writes to standard output only, and
// neither the shared copy nor the working directory gains a file.
func TestExportWritesNothingUnasked(t *testing.T) {
	shared := readOnlySharedCopy(t, "anchors/taso-repo-graph_subst.pb")
	db := filepath.Join(t.TempDir(), "rb.db")
	if out, err := run(context.Background(), "build", "--max-ops", "2", "--no-progress", "--db", db); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	anchor := filepath.Join(shared, "anchors", "taso-repo-graph_subst.pb")
	for _, args := range [][]string{
		{"export", "--version", "v1", "--db", db},
		{"export", "--version", "v1", "--format", "dot", "--op", "concat", "--db", db},
		{"import", anchor, "--db", db},
		{"compare", "--version", "v1", "--no-progress", "--db", db, anchor},
	} {
		workdir, _ := runElsewhereLeavingUnchanged(t, shared, args...)
		if entries, _ := os.ReadDir(workdir); len(entries) > 0 {
			t.Errorf("%v wrote %s into the working directory", args, entries[0].Name())
		}
	}
}
