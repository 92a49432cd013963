package store

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// readOnlyDir makes dir unwritable: a read-only bind mount as root (whom
// permissions do not stop), its mode otherwise. It skips where neither
// can be had.
func readOnlyDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
		t.Skipf("cannot make a read-only folder as root here (mount --bind: %v %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only here: %v %s", err, out)
	}
}

// TestReadOnlyDatabase: a database on a read-only mount is read (stats,
// versions, a version's rules) without a write: no -wal or -shm appears
// and the file is byte-identical; no new database can be created there.
func TestReadOnlyDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ro.db")
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readOnlyDir(t, dir)
	db, err = OpenExisting(ctx, path)
	if err != nil {
		t.Fatalf("open read-only: %v", err)
	}
	if _, err := db.Versions(ctx); err != nil {
		t.Errorf("versions: %v", err)
	}
	if _, err := db.Stats(ctx); err != nil {
		t.Errorf("stats: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the database changed")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the folder holds %v, want the database alone", entries)
	}
	if _, err := Open(ctx, filepath.Join(dir, "new.db")); err == nil {
		t.Error("a new database was created in a read-only folder")
	}
}
