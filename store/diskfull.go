package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"rulebook/internal/budget"
)

// ErrDiskFull is matched (errors.Is) by an error that DiskFull found to
// come from a full disk.
var ErrDiskFull = errors.New("the disk is full")

// minFreeBytes is the free space under which an I/O error is put down to
// a full disk: SQLite grows its files a page or a -shm block at a time.
const minFreeBytes = 1 << 20

// DiskFull says that err came from a full disk when it is SQLite's "full"
// error, or one of its I/O errors while the file system holding the
// database at path has less than a megabyte free: SQLite reports a -shm
// file it cannot grow as "disk I/O error (4874)", which tells a user
// nothing. Other errors are returned as they are.
func DiskFull(path string, err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	code := se.Code() & 0xff
	if code != sqlite3.SQLITE_FULL && code != sqlite3.SQLITE_IOERR {
		return err
	}
	dir, aerr := filepath.Abs(filepath.Dir(path))
	var fs syscall.Statfs_t
	if aerr != nil || syscall.Statfs(dir, &fs) != nil {
		return err
	}
	free := fs.Bavail * uint64(fs.Bsize)
	if code == sqlite3.SQLITE_IOERR && free >= minFreeBytes {
		return err
	}
	return fmt.Errorf("%w: %s has %s free (%w)", ErrDiskFull, dir, budget.FormatBytes(free), err)
}
