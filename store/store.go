// Package store keeps runs and rules in one SQLite file (DESIGN.md, Store).
//
// The file is opened through database/sql and the pure-Go driver
// modernc.org/sqlite, in WAL mode with foreign keys on. A file is recognised as
// a rulebook database by PRAGMA application_id (ApplicationID); its schema
// version is PRAGMA user_version (SchemaVersion). Open refuses, without
// touching the file, anything that is not an SQLite file, an SQLite file of
// another application, or a file written by a newer schema.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotRulebook is matched (errors.Is) by Open's error for a file that is not
// an SQLite file or is an SQLite file of another application.
var ErrNotRulebook = errors.New("not a rulebook database")

// ErrNewerSchema is matched (errors.Is) by Open's error for a rulebook file
// whose schema version is newer than SchemaVersion.
var ErrNewerSchema = errors.New("newer schema")

// openError carries an exact one-line message and a sentinel for errors.Is.
type openError struct {
	msg  string
	kind error
}

func (e *openError) Error() string { return e.msg }
func (e *openError) Unwrap() error { return e.kind }

// Store is an open rulebook database. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// sqliteMagic opens every SQLite 3 database file.
const sqliteMagic = "SQLite format 3\x00"

// timeFormat is RFC 3339 in UTC with fixed-width milliseconds, so that text
// order is time order.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// Open opens or creates the rulebook database at path. An existing file is
// first inspected without being modified (its header, then a read-only,
// immutable connection) and refused with a one-line error if it is not a
// rulebook database or has a newer schema. A new or empty file gets the
// current schema; an older one is migrated, one transaction per version.
func Open(ctx context.Context, path string) (*Store, error) {
	if err := precheck(ctx, path); err != nil {
		return nil, err
	}
	// journal_mode is not a DSN pragma: on a new file every pool connection
	// would race to convert it, and a conversion that loses the race fails
	// with SQLITE_BUSY without waiting. setWAL converts once, with retries;
	// the mode is persistent, so later connections find it set.
	db, err := sql.Open("sqlite", fileURI(path,
		"_pragma=busy_timeout(5000)",
		"_pragma=foreign_keys(1)",
		"_txlock=immediate"))
	if err == nil {
		err = setWAL(ctx, db)
		if err == nil {
			err = migrate(ctx, db, path)
		}
		if err != nil {
			db.Close()
		}
	}
	if err != nil {
		var oe *openError
		if errors.As(err, &oe) {
			return nil, err
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// setWAL switches the file to WAL mode, retrying while another connection
// holds a conflicting lock (at most about busyTimeout).
func setWAL(ctx context.Context, db *sql.DB) error {
	const busyTimeout = 5 * time.Second
	deadline := time.Now().Add(busyTimeout)
	wait := time.Millisecond
	for {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err == nil {
			if !strings.EqualFold(mode, "wal") {
				return fmt.Errorf("cannot switch to WAL mode (journal mode is %s)", mode)
			}
			return nil
		}
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return fmt.Errorf("set WAL mode: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// Close closes the database; in WAL mode the last close checkpoints and
// removes the -wal and -shm files.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	return nil
}

// Path returns the path the store was opened with.
func (s *Store) Path() string { return s.path }

// precheck inspects path without modifying it. A missing file passes (Open
// creates it) if its directory exists.
func precheck(ctx context.Context, path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(path)
		di, derr := os.Stat(dir)
		if derr != nil {
			return fmt.Errorf("store: cannot create %s: %w", path, unwrapPathError(derr))
		}
		if !di.IsDir() {
			return fmt.Errorf("store: cannot create %s: %s is not a directory", path, dir)
		}
		return nil
	case err != nil:
		return fmt.Errorf("store: cannot read %s: %w", path, unwrapPathError(err))
	case fi.IsDir():
		return fmt.Errorf("store: cannot open %s: is a directory", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("store: cannot open %s: not a regular file", path)
	}

	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store: cannot read %s: %w", path, unwrapPathError(err))
	}
	var hdr [100]byte
	n, err := io.ReadFull(f, hdr[:])
	f.Close()
	switch {
	case n == 0 && (err == io.EOF):
		return nil // empty file: becomes a new database
	case err == io.ErrUnexpectedEOF || (err == nil && string(hdr[:16]) != sqliteMagic):
		return &openError{fmt.Sprintf("%s is not a rulebook database: not an SQLite file", path), ErrNotRulebook}
	case err != nil:
		return fmt.Errorf("store: cannot read %s: %w", path, unwrapPathError(err))
	}

	// The header already holds application_id (offset 68) and user_version
	// (offset 60), but a -wal file may hold newer pages, and we must know
	// whether the file has tables, so ask SQLite. Without a -wal file the
	// main file is complete and immutable=1 guarantees that SQLite neither
	// locks nor creates side files. With one, a read-only connection reads
	// through the WAL (SQLite may then create the -shm file). If a -wal file
	// appeared during an immutable read (another process is creating the
	// database), the read may be torn: a refusal is then checked again.
	err = inspectFile(ctx, path, true)
	if err != nil && fileExists(path+"-wal") {
		err = inspectFile(ctx, path, false)
	}
	return err
}

// inspectFile validates the SQLite file at path through a read-only
// connection; immutable when there is no -wal file and mayBeImmutable.
func inspectFile(ctx context.Context, path string, mayBeImmutable bool) error {
	params := []string{"mode=ro", "_pragma=busy_timeout(5000)"}
	if mayBeImmutable && !fileExists(path+"-wal") {
		params = append(params, "immutable=1")
	}
	ro, err := sql.Open("sqlite", fileURI(path, params...))
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	defer ro.Close()
	ro.SetMaxOpenConns(1)
	appID, version, tables, err := inspect(ctx, ro)
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_NOTADB {
			return &openError{fmt.Sprintf("%s is not a rulebook database: not an SQLite file", path), ErrNotRulebook}
		}
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	return validate(path, appID, version, tables)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// querier is what inspect needs from *sql.DB and *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// inspect reads application_id, user_version and the number of schema
// objects.
func inspect(ctx context.Context, q querier) (appID uint32, version int64, tables int64, err error) {
	// One statement, so that all three come from the same snapshot.
	var id int64
	err = q.QueryRowContext(ctx, `SELECT
		(SELECT application_id FROM pragma_application_id()),
		(SELECT user_version FROM pragma_user_version()),
		(SELECT count(*) FROM sqlite_schema)`).Scan(&id, &version, &tables)
	return uint32(id), version, tables, err
}

// validate decides whether a file with these header values may be opened.
// A file of ours, or an empty SQLite file with no application id, passes.
func validate(path string, appID uint32, version, tables int64) error {
	if appID != ApplicationID && (appID != 0 || tables > 0 || version != 0) {
		return &openError{fmt.Sprintf("%s is not a rulebook database (application id 0x%08X)", path, appID), ErrNotRulebook}
	}
	if version > SchemaVersion {
		return &openError{fmt.Sprintf("%s was written by a newer rulebook (schema v%d); this build reads up to v%d", path, version, SchemaVersion), ErrNewerSchema}
	}
	if version < 0 {
		return &openError{fmt.Sprintf("%s is not a rulebook database (schema v%d)", path, version), ErrNotRulebook}
	}
	return nil
}

// migrate brings the database to SchemaVersion, one transaction per step.
// Each transaction re-checks the file (it may have changed since precheck)
// and takes the write lock first (_txlock=immediate), so two processes
// opening a new file at once apply each step once.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	for {
		done, err := migrateStep(ctx, db, path)
		if err != nil || done {
			return err
		}
	}
}

func migrateStep(ctx context.Context, db *sql.DB, path string) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	appID, version, tables, err := inspect(ctx, tx)
	if err != nil {
		return false, err
	}
	if err := validate(path, appID, version, tables); err != nil {
		return false, err
	}
	if version == SchemaVersion {
		return true, tx.Commit()
	}
	next := version + 1
	if version == 0 {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", int32(ApplicationID))); err != nil {
			return false, fmt.Errorf("set application id: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, migrations[next]); err != nil {
		return false, fmt.Errorf("schema v%d: %w", next, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", next)); err != nil {
		return false, fmt.Errorf("schema v%d: %w", next, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES ('schema_version', ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, fmt.Sprint(next)); err != nil {
		return false, fmt.Errorf("schema v%d: %w", next, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("schema v%d: %w", next, err)
	}
	return next == SchemaVersion, nil
}

// fileURI makes an SQLite URI for path with the given query parameters.
// Characters that URIs give meaning to are percent-encoded.
func fileURI(path string, params ...string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	var b strings.Builder
	b.WriteString("file:")
	if !strings.HasPrefix(abs, "/") {
		b.WriteString("/") // Windows: file:/C:/...
	}
	for _, c := range []byte(filepath.ToSlash(abs)) {
		switch c {
		case '%', '?', '#':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	if len(params) > 0 {
		b.WriteByte('?')
		b.WriteString(strings.Join(params, "&"))
	}
	return b.String()
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
