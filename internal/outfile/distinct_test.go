package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// An output is refused when it is an input or an earlier output under any
// name: the same path spelled otherwise, a symbolic link, a hard link, a
// database's side file that does not exist yet, a link to one.
func TestDistinct(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	must(os.WriteFile(p("m.onnx"), []byte("model"), 0o644))
	must(os.WriteFile(p("t.db"), []byte("db"), 0o644))
	must(os.Symlink("m.onnx", p("link.onnx")))
	must(os.Link(p("m.onnx"), p("hard.onnx")))
	must(os.Symlink("t.db-wal", p("wal-link")))
	must(os.Mkdir(p("sub"), 0o755))
	must(os.Symlink(dir, p("sub/up")))
	inputs := append([]Named{{p("m.onnx"), "the model"}}, Database(p("t.db"))...)
	for _, tc := range []struct {
		name    string
		outputs []string
		refused bool
	}{
		{"new files", []string{p("out.onnx"), p("out.json")}, false},
		{"the model", []string{p("m.onnx")}, true},
		{"the model spelled otherwise", []string{p("sub/../m.onnx")}, true},
		{"the model through a linked folder", []string{p("sub/up/m.onnx")}, true},
		{"a symbolic link to the model", []string{p("link.onnx")}, true},
		{"a hard link to the model", []string{p("hard.onnx")}, true},
		{"the database", []string{p("t.db")}, true},
		{"the database's -wal, not there yet", []string{p("t.db-wal")}, true},
		{"a link to the database's -shm", []string{p("sub/up/t.db-shm")}, true},
		{"a dangling link to the -wal", []string{p("wal-link")}, true},
		{"two outputs alike", []string{p("a.json"), p("sub/../a.json")}, true},
	} {
		var outputs []Named
		for _, o := range tc.outputs {
			outputs = append(outputs, Named{o, "-o"})
		}
		err := Distinct(inputs, outputs)
		if got := errors.Is(err, ErrIsInput); got != tc.refused {
			t.Errorf("%s: Distinct = %v; refused %v, want %v", tc.name, err, got, tc.refused)
		}
	}
}
