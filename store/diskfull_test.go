package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDiskFull: writing rules to a database on a full file system fails
// with ErrDiskFull naming the folder, not with SQLite's bare code. It
// needs a small tmpfs, which only root can mount.
func TestDiskFull(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	path := filepath.Join(dir, "full.db")
	ctx := context.Background()
	var err error
	db, err := Open(ctx, path)
	for i := 0; err == nil && i < 10_000; i++ {
		_, err = db.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS filler (x BLOB) STRICT; INSERT INTO filler VALUES (randomblob(4096))")
	}
	if db != nil {
		db.Close()
	}
	if err == nil {
		t.Fatal("200 KiB took 40 MB without an error")
	}
	err = DiskFull(path, fmt.Errorf("store: fill: %w", err))
	if !errors.Is(err, ErrDiskFull) {
		t.Errorf("%v, want ErrDiskFull", err)
	}
}
