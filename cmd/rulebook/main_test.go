package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"rulebook/store"
)

func run(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestGenerateListShowStats(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	ctx := context.Background()
	out, err := run(ctx, "generate", "--max-ops", "2", "--ops", "matmul,ewadd,transpose", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"graphs enumerated", "distinct fingerprints", "fingerprint collisions", "pairs after float test", "stored (new)"} {
		if !strings.Contains(out, want) {
			t.Errorf("generate output lacks %q:\n%s", want, out)
		}
	}
	again, err := run(ctx, "generate", "--max-ops", "2", "--ops", "matmul,ewadd,transpose", "--db", db)
	if err != nil || !regexp.MustCompile(`stored \(new\)\s+0\n`).MatchString(again) {
		t.Errorf("re-run stored rules again (err %v):\n%s", err, again)
	}
	list, err := run(ctx, "list", "--op", "transpose", "--db", db)
	if err != nil || !strings.Contains(list, "(transpose (transpose ?a)) => ?a") {
		t.Errorf("list --op transpose (err %v):\n%s", err, list)
	}
	show, err := run(ctx, "show", "1", "--db", db)
	if err != nil || !strings.Contains(show, "status:      candidate") {
		t.Errorf("show 1 (err %v):\n%s", err, show)
	}
	stats, err := run(ctx, "stats", "--db", db)
	if err != nil || !strings.Contains(stats, "from 2 runs") {
		t.Errorf("stats (err %v):\n%s", err, stats)
	}
}

// TestBadInputLeavesDatabaseUnchanged covers issue 2's error cases: each
// gives a one-line error and the database file stays byte-for-byte equal.
func TestBadInputLeavesDatabaseUnchanged(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	good := filepath.Join(dir, "good.db")
	if _, err := run(ctx, "generate", "--max-ops", "1", "--ops", "relu,transpose", "--db", good); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "notes.db")
	os.WriteFile(text, []byte("hello, not a database\n"), 0o644)
	foreign := filepath.Join(dir, "foreign.db")
	execSQL(t, foreign, "CREATE TABLE photos(id INTEGER PRIMARY KEY, path TEXT)")
	newer := filepath.Join(dir, "newer.db")
	if _, err := run(ctx, "generate", "--max-ops", "1", "--ops", "relu", "--db", newer); err != nil {
		t.Fatal(err)
	}
	execSQL(t, newer, "PRAGMA user_version = 99")

	cases := []struct {
		name string
		db   string
		args []string
		want string
	}{
		{"unknown operator", good, []string{"generate", "--ops", "matmul,frobnicate"}, `unknown operator "frobnicate"`},
		{"zero max-ops", good, []string{"generate", "--max-ops", "0"}, "--max-ops must be between 1 and"},
		{"text file", text, []string{"generate", "--max-ops", "1"}, "not a rulebook database"},
		{"foreign sqlite", foreign, []string{"generate", "--max-ops", "1"}, "not a rulebook database"},
		{"newer schema", newer, []string{"generate", "--max-ops", "1"}, "newer"},
		{"directory", dir, []string{"list"}, dir},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var before [32]byte
			if st, err := os.Stat(c.db); err == nil && !st.IsDir() {
				before = fileHash(t, c.db)
			}
			_, err := run(ctx, append(c.args, "--db", c.db)...)
			if err == nil {
				t.Fatalf("no error")
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line containing %q", msg, c.want)
			}
			if st, err := os.Stat(c.db); err == nil && !st.IsDir() && fileHash(t, c.db) != before {
				t.Errorf("%s changed", c.db)
			}
			for _, side := range []string{"-wal", "-shm"} {
				if c.db != good && c.db != newer {
					if _, err := os.Stat(c.db + side); err == nil {
						t.Errorf("%s%s was created", c.db, side)
					}
				}
			}
		})
	}
}

func execSQL(t *testing.T, path, stmt string) {
	t.Helper()
	if err := execSQLErr(path, stmt); err != nil {
		t.Fatal(err)
	}
}

// execSQLErr runs one statement as sqlite3 would, behind rulebook's back.
func execSQLErr(path, stmt string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(stmt)
	return err
}

// TestInterruptedRunLeavesConsistentDatabase cancels a generation midway,
// as Ctrl-C does, and checks that no rules were written and the run is
// marked interrupted.
func TestInterruptedRunLeavesConsistentDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := run(ctx, "generate", "--max-ops", "3", "--db", db)
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("expected an interrupted run, got %v", err)
	}
	s, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Rules != 0 || len(runs) != 1 || runs[0].Status != "interrupted" {
		t.Errorf("after interruption: %d rules, runs %+v", st.Rules, runs)
	}
}
