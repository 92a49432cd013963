package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
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

// TestDiffAcrossDatabasesAndBundles: diff compares versions of two
// databases (FILE:TAG) and exported bundles, re-hashing each, and refuses
// a changed bundle or a missing file without creating it.
func TestDiffAcrossDatabasesAndBundles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	verifiedDB(t, a, "ewadd,relu")
	verifiedDB(t, b, "ewadd,relu,transpose")
	for _, db := range []string{a, b} {
		if _, err := run(ctx, "release", "v1", "--db", db); err != nil {
			t.Fatal(err)
		}
	}
	bundle := filepath.Join(dir, "a-v1.json")
	if _, err := run(ctx, "export", "--version", "v1", "--format", "json", "-o", bundle, "--db", a); err != nil {
		t.Fatal(err)
	}
	transpose := "(transpose (transpose ?a)) => ?a"
	for _, c := range []struct {
		from, to string
		want     []string
	}{
		{"v1", b + ":v1", []string{"v1 (", " -> " + b + ":v1 (", "+ " + transpose}},
		{b + ":v1", bundle, []string{b + ":v1 (", " -> " + bundle + " (v1) (", ": 0 added, ", "- " + transpose}},
		{bundle, "v1", []string{bundle + " (v1) (", ": 0 added, 0 removed"}},
	} {
		out, err := run(ctx, "diff", c.from, c.to, "--db", a)
		if err != nil {
			t.Errorf("diff %s %s: %v", c.from, c.to, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("diff %s %s lacks %q:\n%s", c.from, c.to, w, out)
			}
		}
	}
	changed := filepath.Join(dir, "changed.json")
	data, _ := os.ReadFile(bundle)
	dst := regexp.MustCompile(`"dst": "([^"]*)"`).FindStringSubmatch(string(data)) // the first rule's
	os.WriteFile(changed, []byte(strings.Replace(string(data), dst[0], `"dst": "(relu `+dst[1]+`)"`, 1)), 0o644)
	missing := filepath.Join(dir, "missing.db")
	for _, c := range []struct{ ref, want string }{
		{changed, "does not match its content hash"},
		{missing + ":v1", missing + ": no such database (in FILE:TAG, FILE is a rulebook database)"},
		{filepath.Join(dir, "missing.json"), "missing.json: no such bundle file"},
		{b + ":v9", b + `: unknown version "v9" (released: v1)`},
	} {
		if _, err := run(ctx, "diff", "v1", c.ref, "--db", a); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("diff v1 %s: got %v, want %q", c.ref, err, c.want)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("diff created %s", missing)
	}
}
