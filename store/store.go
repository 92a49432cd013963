// Package store keeps runs and rules in one SQLite file, through
// database/sql and the pure-Go driver modernc.org/sqlite. PRAGMA
// application_id marks a rulebook database, and PRAGMA user_version is its
// schema version. Open refuses, without touching it, a file that is not
// SQLite, belongs to another application, has a newer schema or is damaged.
// OpenExisting also refuses a path where no database exists yet.
// docs/schema.md describes every table and view.
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
	"syscall"
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

// ErrDamaged is matched (errors.Is) by Open's error for a file that
// SQLite's quick_check finds damaged.
var ErrDamaged = errors.New("damaged database")

// ErrNoDatabase is matched (errors.Is) by OpenExisting's error for a path
// where no rulebook database exists yet.
var ErrNoDatabase = errors.New("no rulebook database")

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
// rulebook database, has a newer schema or is damaged (SQLite's
// quick_check, about 16 ms for a database of 10,000 rules). A new or empty
// file gets the current schema; an older one is migrated, one transaction
// per version. Runs left 'running' by a process of this host that is gone
// are marked 'abandoned'.
func Open(ctx context.Context, path string) (*Store, error) { return open(ctx, path, false) }

// OpenExisting is Open for commands that read a database someone built:
// a path where none exists yet (a missing or empty file, or an SQLite file
// without rulebook's tables) is refused with ErrNoDatabase, and nothing is
// created, so that a mistyped path is reported rather than answered from a
// new, empty database.
func OpenExisting(ctx context.Context, path string) (*Store, error) { return open(ctx, path, true) }

func open(ctx context.Context, path string, existing bool) (*Store, error) {
	if err := precheck(ctx, path, existing); err != nil {
		return nil, err
	}
	if existing && !writable(path) {
		return openReadOnly(ctx, path)
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
		// Creating or upgrading the schema is short and must not stop half
		// way: an interrupted creation would leave an SQLite file without
		// rulebook's tables, which later opens refuse.
		setup := context.WithoutCancel(ctx)
		err = setWAL(setup, db)
		if err == nil {
			err = migrate(setup, db, path)
		}
		if err == nil {
			err = markAbandoned(ctx, db)
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

// ErrReadOnly is matched (errors.Is) by the refusal of a database that
// can be neither written nor read as it is.
var ErrReadOnly = errors.New("the database cannot be written")

// writable reports whether the database file and its folder (where
// SQLite puts the -wal and -shm files) can be written: not on a read-only
// mount, not without permission.
func writable(path string) bool {
	const wOK = 2
	return syscall.Access(path, wOK) == nil && syscall.Access(filepath.Dir(path), wOK) == nil
}

// openReadOnly opens a database that cannot be written (a read-only mount
// or folder) for reading: immutable, so SQLite neither locks nor creates
// side files. Nothing can have changed it since precheck read it whole;
// one with a -wal file (pages not yet in the main file, which an
// immutable read would miss) or an older schema (which needs a write to
// migrate) is refused, and any write later fails.
func openReadOnly(ctx context.Context, path string) (*Store, error) {
	if fileExists(path + "-wal") {
		return nil, fmt.Errorf("store: open %s: %w, and its -wal file holds changes not yet in it; open it once where it can be written", path, ErrReadOnly)
	}
	db, err := sql.Open("sqlite", fileURI(path, "mode=ro", "immutable=1", "_pragma=foreign_keys(1)"))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	var version int64
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if version != SchemaVersion {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w, and its schema v%d needs migrating to v%d; open it once where it can be written", path, ErrReadOnly, version, SchemaVersion)
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
// creates it) if its directory exists, unless existing asks for a database
// that exists.
func precheck(ctx context.Context, path string, existing bool) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && existing:
		return noDatabase(path, "no such file")
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
	case n == 0 && err == io.EOF && existing:
		return noDatabase(path, "the file is empty")
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
	version, err := inspectFile(ctx, path, true)
	if err != nil && fileExists(path+"-wal") {
		version, err = inspectFile(ctx, path, false)
	}
	if err == nil && existing && version == 0 {
		return noDatabase(path, "an SQLite file without rulebook's tables")
	}
	return err
}

// noDatabase is OpenExisting's refusal of path, saying what is there.
func noDatabase(path, what string) error {
	return &openError{fmt.Sprintf("no rulebook database at %s (%s); 'rulebook build' or 'rulebook generate' creates one", path, what), ErrNoDatabase}
}

// inspectFile validates the SQLite file at path through a read-only
// connection, immutable when there is no -wal file and mayBeImmutable,
// and returns its schema version. A file with tables must pass
// quick_check.
func inspectFile(ctx context.Context, path string, mayBeImmutable bool) (version int64, err error) {
	params := []string{"mode=ro", "_pragma=busy_timeout(5000)"}
	if mayBeImmutable && !fileExists(path+"-wal") {
		params = append(params, "immutable=1")
	}
	ro, err := sql.Open("sqlite", fileURI(path, params...))
	if err != nil {
		return 0, fmt.Errorf("store: open %s: %w", path, err)
	}
	defer ro.Close()
	ro.SetMaxOpenConns(1)
	appID, version, tables, err := inspect(ctx, ro)
	if err != nil {
		return 0, readError(path, err)
	}
	if err := validate(path, appID, version, tables); err != nil {
		return 0, err
	}
	if tables > 0 {
		err = quickCheck(ctx, ro, path)
	}
	return version, err
}

// readError explains an error reading path: not an SQLite file, damaged,
// or something else.
func readError(path string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB:
			return &openError{fmt.Sprintf("%s is not a rulebook database: not an SQLite file", path), ErrNotRulebook}
		case sqlite3.SQLITE_CORRUPT:
			return damaged(path, problem(se.Error()))
		}
	}
	return fmt.Errorf("store: open %s: %w", path, err)
}

// quickCheck runs SQLite's quick_check, which reads every page and checks
// the b-trees' structure (not that indexes match their tables, which
// integrity_check adds at about seven times the cost). A damaged file is
// refused before anything writes to it, since writing into a broken
// b-tree spreads the damage.
func quickCheck(ctx context.Context, db *sql.DB, path string) error {
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return readError(path, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var report string
		if err := rows.Scan(&report); err != nil {
			return readError(path, err)
		}
		if report != "ok" {
			problems = append(problems, problem(report))
		}
	}
	// SQLite may give up with SQLITE_CORRUPT after reporting problems:
	// the problems say more.
	if err := rows.Err(); err != nil && len(problems) == 0 {
		return readError(path, err)
	}
	switch len(problems) {
	case 0:
		return nil
	case 1:
		return damaged(path, problems[0])
	}
	return damaged(path, fmt.Sprintf("%s, and %d more problems", problems[0], len(problems)-1))
}

// problem is one quick_check report on one line, without the line naming
// the schema ("*** in database main ***").
func problem(report string) string {
	var lines []string
	for _, l := range strings.Split(report, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "***") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

func damaged(path, problem string) error {
	return &openError{fmt.Sprintf("%s is damaged and was not opened (SQLite's quick_check: %s); restore it from a copy", path, problem), ErrDamaged}
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
// A file already there is only read, so that opening a database another
// process is writing to does not wait for the write lock. Each transaction
// re-checks the file (it may have changed since precheck) and takes the
// write lock first (_txlock=immediate), so two processes opening a new
// file at once apply each step once. The steps run on one connection with
// foreign keys off (see migrations), which is given back with them on.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	appID, version, tables, err := inspect(ctx, db)
	if err != nil {
		return err
	}
	if err := validate(path, appID, version, tables); err != nil || (version == SchemaVersion && appID == ApplicationID) {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON")
	for {
		done, err := migrateStep(ctx, conn, path)
		if err != nil || done {
			return err
		}
	}
}

func migrateStep(ctx context.Context, conn *sql.Conn, path string) (done bool, err error) {
	tx, err := conn.BeginTx(ctx, nil)
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
	if err := checkForeignKeys(ctx, tx); err != nil {
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

// checkForeignKeys fails if any row refers to a row that does not exist:
// migrations run with enforcement off, so they check before committing.
func checkForeignKeys(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return err
	}
	defer rows.Close()
	if rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fkid int64
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return err
		}
		return fmt.Errorf("row %d of %s refers to a missing row of %s", rowid.Int64, table, parent)
	}
	return rows.Err()
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
