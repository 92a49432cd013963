package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rulebook/internal/testfiles"
)

var sqlBlock = regexp.MustCompile("(?s)```sql\n(.*?)```")

// TestSchemaDocQueries runs every SQL example of docs/schema.md on a
// database made the way the README makes one: 'rulebook build --max-ops 3'
// (build.Run: generate, verify, prune, release v1), then a TASO file
// imported, squeezenet optimized with measured costs and a model of halved
// products with the analytic model, so that the tables of those commands
// have rows too. Each example must return at
// least one row, and be pasteable between the double quotes of
// sqlite3 rulebook.db "…".
func TestSchemaDocQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a ≤3 rulebook")
	}
	doc, err := os.ReadFile("../../docs/schema.md")
	must(t, err)
	blocks := sqlBlock.FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 8 {
		t.Fatalf("%d sql examples in docs/schema.md, want at least 8", len(blocks))
	}
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "rulebook.db")
	halved := filepath.Join(dir, "halved.onnx")
	writeHalvedModel(t, halved)
	for _, args := range [][]string{
		{"build", "--max-ops", "3", "--tag", "v1", "--no-progress"},
		{"import", testfiles.Shared(t, "anchors", "taso-repo-graph_subst.pb")},
		{"optimize", testfiles.Shared(t, "models", "squeezenet1_1.onnx"), "--rules", "v1", "--budget", "10", "--cost", "measured", "--confirm", "0",
			"--no-progress", "-o", filepath.Join(dir, "squeezenet.opt.onnx")},
		// Measured costs fill the cost table, but whether a rewrite pays
		// off by them depends on the machine's load; the analytic model
		// folds the halvings into weights every time, so the newest
		// optimization of a model has rule uses for the examples to find.
		{"optimize", halved, "--rules", "v1", "--budget", "10", "--cost", "analytic",
			"--no-progress", "-o", filepath.Join(dir, "halved.opt.onnx")},
	} {
		if out, err := run(ctx, append(args, "--db", path)...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	// A plain connection, as the sqlite3 shell would open the file.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	must(t, err)
	defer db.Close()
	for i, b := range blocks {
		q := strings.TrimSpace(b[1])
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if strings.Contains(q, `"`) {
				t.Errorf("query contains a double quote, cannot be pasted into sqlite3 rulebook.db \"...\": %s", q)
			}
			if n, err := countRows(ctx, db, q); err != nil || n == 0 {
				t.Errorf("%s: %d rows, %v; want at least one", q, n, err)
			}
		})
	}
}

func countRows(ctx context.Context, db *sql.DB, q string) (int, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}
