package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// verifiedDB generates rules over ops and verifies them.
func verifiedDB(t *testing.T, db, ops string) {
	t.Helper()
	ctx := context.Background()
	if _, err := run(ctx, "generate", "--max-ops", "2", "--ops", ops, "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, "verify", "../../axioms", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
}

func TestReleaseDiffAndTampering(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "r.db")
	if _, err := run(ctx, "generate", "--max-ops", "2", "--ops", "ewadd,relu", "--db", db); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, "release", "v0", "--db", db); err == nil || !strings.Contains(err.Error(), "no proved rules to release") {
		t.Errorf("release with nothing proved: %v", err)
	}
	verifiedDB(t, db, "ewadd,relu")
	out, err := run(ctx, "release", "v1", "--db", db)
	if err != nil || !strings.Contains(out, "released v1") {
		t.Fatalf("release v1: %v\n%s", err, out)
	}
	if _, err := run(ctx, "release", "v1", "--db", db); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a second v1: %v", err)
	}
	verifiedDB(t, db, "ewadd,relu,transpose")
	if _, err := run(ctx, "release", "v2", "--db", db); err != nil {
		t.Fatal(err)
	}
	diff, err := run(ctx, "diff", "v1", "v2", "--db", db)
	if err != nil || !strings.Contains(diff, "+ (transpose (transpose ?a)) => ?a") || strings.Contains(diff, "\n- ") {
		t.Errorf("diff v1 v2 (err %v):\n%s", err, diff)
	}
	list, err := run(ctx, "versions", "--db", db)
	if err != nil || !strings.Contains(list, "v2") || !strings.Contains(list, "v1") {
		t.Errorf("versions (err %v):\n%s", err, list)
	}
	v2hash := strings.Fields(list[strings.Index(list, "\nv2"):])[1]
	if byHash, err := run(ctx, "diff", "v1", v2hash[:6], "--db", db); err != nil || byHash != diff {
		t.Errorf("diff by hash prefix %s (err %v):\n%s", v2hash[:6], err, byHash)
	}
	if err := execSQLErr(db, "UPDATE versions SET rules = 1 WHERE tag = 'v1'"); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("updating a version: %v", err)
	}
	if _, err := run(ctx, "diff", "v1", "v9", "--db", db); err == nil || !strings.Contains(err.Error(), `unknown version "v9" (released: v1, v2)`) {
		t.Errorf("unknown tag: %v", err)
	}
	// Versions refuse edits; editing a rule they hold is detected on load.
	execSQL(t, db, "UPDATE rules SET dst = '(relu ?a)' WHERE id = (SELECT rule_id FROM version_rules vr JOIN versions v ON v.id = vr.version_id WHERE v.tag = 'v1' LIMIT 1)")
	if _, err := run(ctx, "diff", "v1", "v2", "--db", db); err == nil || !strings.Contains(err.Error(), "version v1 was changed outside rulebook") {
		t.Errorf("tampered v1 loaded: %v", err)
	}
}

func TestSameRulesSameHash(t *testing.T) {
	ctx := context.Background()
	hash := func(name string) string {
		db := filepath.Join(t.TempDir(), name)
		verifiedDB(t, db, "ewadd,ewmul,transpose")
		out, err := run(ctx, "release", "r", "--db", db)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(out)[5]
	}
	if a, b := hash("a.db"), hash("b.db"); a != b {
		t.Errorf("two databases with the same rules: %s and %s", a, b)
	}
}
