package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGenerateParallel: --ops parallel --degrees 2,3 stores PCG candidates,
// counted in the stage table with the rules generalised to d, and list
// finds them by operator with d in their text.
func TestGenerateParallel(t *testing.T) {
	db := filepath.Join(t.TempDir(), "pcg.db")
	ctx := context.Background()
	out, err := run(ctx, "generate", "--ops", "parallel", "--degrees", "2,3", "--max-ops", "2", "--db", db, "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	stored := regexp.MustCompile(`stored \(new\)\s+(\d+)\n`).FindStringSubmatch(out)
	general := regexp.MustCompile(`generalised to degree d\s+(\d+)\n`).FindStringSubmatch(out)
	if stored == nil || stored[1] == "0" || general == nil || general[1] == "0" {
		t.Fatalf("expected stored and generalised rules:\n%s", out)
	}
	list, err := run(ctx, "list", "--op", "combine", "--db", db)
	if err != nil || !strings.Contains(list, "(combine 0 d (partition 0 d ?a)) => ?a") {
		t.Errorf("list --op combine (err %v):\n%s", err, list)
	}
	// The default set's table has no degree row.
	plain, err := run(ctx, "generate", "--ops", "relu", "--max-ops", "1", "--db", db)
	if err != nil || strings.Contains(plain, "degree") {
		t.Errorf("default-set table (err %v):\n%s", err, plain)
	}
}

// TestBadDegreesWriteNothing: every bad --degrees value is refused in one
// line naming the flag, before the database is created.
func TestBadDegreesWriteNothing(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ args []string }{
		{[]string{"generate", "--ops", "parallel", "--degrees", "0"}},
		{[]string{"generate", "--ops", "parallel", "--degrees", "1"}},
		{[]string{"generate", "--ops", "parallel", "--degrees", "-3"}},
		{[]string{"generate", "--ops", "parallel", "--degrees", "two"}},
		{[]string{"generate", "--ops", "parallel", "--degrees", "2,2"}},
		{[]string{"generate", "--ops", "parallel", "--degrees", "4096"}},
		{[]string{"generate", "--degrees", "3"}},
		{[]string{"build", "--ops", "parallel", "--degrees", "2,x"}},
	} {
		db := filepath.Join(t.TempDir(), "r.db")
		_, err := run(ctx, append(c.args, "--db", db)...)
		if err == nil || !strings.HasPrefix(err.Error(), "--degrees: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: expected one line about --degrees, got %v", c.args, err)
		}
		if _, err := os.Stat(db); !os.IsNotExist(err) {
			t.Errorf("%v: %s was created", c.args, db)
		}
	}
}
