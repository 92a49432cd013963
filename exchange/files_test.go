package exchange

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// WriteFile leaves the old file as it was when the writer fails, and
// replaces it when the writer succeeds.
func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := WriteFile(path, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	if data, _ := os.ReadFile(path); err != boom || string(data) != "old" {
		t.Errorf("a failed write: %v, file %q", err, data)
	}
	if err := WriteFile(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "new" {
		t.Errorf("file %q after a write", data)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".v1.json.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
