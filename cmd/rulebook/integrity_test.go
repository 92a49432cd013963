package main

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rulebook/store"
)

// Issue 13: the commands that read a database refuse one that does not
// exist, with one line, and create nothing.
func TestReadingCommandsRefuseMissingDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	anchor := sharedAnchor(t, "taso-repo-graph_subst.pb")
	for _, args := range [][]string{
		{"stats"}, {"list"}, {"show", "1"}, {"why", "1"}, {"versions"}, {"diff", "v1", "v2"},
		{"export", "--version", "v1", "-o", filepath.Join(dir, "v1.json")}, {"usage"}, {"compare", "--version", "v1", anchor},
		{"verify", "../../axioms"}, {"prune"}, {"release", "v1"},
	} {
		_, err := run(ctx, append(args, "--db", missing)...)
		if err == nil || !strings.Contains(err.Error(), "no rulebook database at "+missing) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v on a missing database: %v; want one line saying there is none", args, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("%v left %v behind", args, entries)
		}
	}
}

func TestListRefusesUnknownStatus(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	if _, err := run(context.Background(), "generate", "--max-ops", "1", "--ops", "relu,transpose", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	_, err := run(context.Background(), "list", "--status", "bogus", "--db", db)
	if err == nil || !strings.Contains(err.Error(), `--status: unknown status "bogus" (known: candidate, proved, refuted, unknown)`) {
		t.Errorf("list --status bogus: %v", err)
	}
}

// Exports and pictures are written only onto a regular file or a new name:
// /dev/full, a FIFO, a symbolic link and a directory are refused with one
// line and left as they were; a new export gets mode 0644.
func TestOutputsOnlyRegularFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := filepath.Join(dir, "r.db")
	verifiedDB(t, db, "ewadd,relu")
	if _, err := run(ctx, "release", "v1", "--db", db); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// Pictures take their format from the extension, so every name has
	// one but /dev/full.
	target := filepath.Join(out, "target.svg")
	must(t, os.WriteFile(target, []byte("kept"), 0o644))
	link := filepath.Join(out, "link.svg")
	must(t, os.Symlink(target, link))
	fifo := filepath.Join(out, "fifo.svg")
	must(t, syscall.Mkfifo(fifo, 0o644))
	sub := filepath.Join(out, "sub.svg")
	must(t, os.Mkdir(sub, 0o755))
	_, noDot := exec.LookPath("dot")
	for path, what := range map[string]string{"/dev/full": "a device", fifo: "a FIFO", link: "a symbolic link", sub: "a directory"} {
		before, _ := os.Lstat(path)
		for _, args := range [][]string{
			{"export", "--version", "v1", "-o", path, "--db", db},
			{"show", "1", "--svg", path, "--db", db},
		} {
			if args[0] == "show" && (path == "/dev/full" || noDot != nil) {
				continue
			}
			_, err := run(ctx, args...)
			if err == nil || !strings.Contains(err.Error(), "cannot write "+path+": it is "+what) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%v: %v; want one line saying it is %s", args, err, what)
			}
			if after, _ := os.Lstat(path); after.Mode() != before.Mode() {
				t.Errorf("%v: %s was %v, is %v", args, path, before.Mode(), after.Mode())
			}
		}
	}
	if data, _ := os.ReadFile(target); string(data) != "kept" {
		t.Errorf("the link's target holds %q", data)
	}
	if entries, _ := os.ReadDir(sub); len(entries) != 0 {
		t.Errorf("the directory holds %v", entries)
	}
	exported := filepath.Join(out, "v1.json")
	if _, err := run(ctx, "export", "--version", "v1", "-o", exported, "--db", db); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(exported); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("export mode %v (%v), want 0644", st.Mode().Perm(), err)
	}
}

// Issue 13: generate on a database with a real flipped bit wrote to it.
// Now every command refuses the damaged file before writing, and the file
// stays as it was.
func TestDamagedDatabaseRefusedBeforeAnyWrite(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "r.db")
	if _, err := run(ctx, "generate", "--max-ops", "2", "--ops", "ewadd,ewmul,relu,transpose", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	root := queryInt(t, db, "SELECT rootpage FROM sqlite_schema WHERE name = 'rules'")
	pageSize := queryInt(t, db, "PRAGMA page_size")
	// The high byte of the page's cell count (byte 3 of a b-tree page).
	f, err := os.OpenFile(db, os.O_RDWR, 0)
	must(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, int64((root-1)*pageSize+3))
	must(t, err)
	b[0] ^= 1 << 4
	_, err = f.WriteAt(b, int64((root-1)*pageSize+3))
	must(t, err)
	must(t, f.Close())
	before := fileHash(t, db)
	for _, args := range [][]string{{"generate", "--max-ops", "1", "--no-progress"}, {"verify", "../../axioms", "--no-progress"}, {"stats"}} {
		_, err := run(ctx, append(args, "--db", db)...)
		if err == nil || !strings.Contains(err.Error(), db+" is damaged") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v on a damaged database: %v", args, err)
		}
		if fileHash(t, db) != before {
			t.Fatalf("%v changed the damaged file", args)
		}
	}
}

// waitForRun waits until the database at path records a run of command
// with the given status, reading it as sqlite3 would.
func waitForRun(t *testing.T, path, command, status string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	must(t, err)
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var id int64
		err := db.QueryRow(`SELECT id FROM runs WHERE command = ? AND status = ? ORDER BY id DESC LIMIT 1`, command, status).Scan(&id)
		if err == nil {
			return id
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s run became %s in %s", command, status, path)
	return 0
}

// Issue 13: after a SIGKILL the run stayed 'running' for ever. A real
// 'rulebook generate' process is killed mid-run; the next command that
// opens the database shows the run abandoned.
func TestKilledRunIsAbandoned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "r.db")
	child := exec.Command(bin, "generate", "--max-ops", "3", "--db", db, "--no-progress")
	must(t, child.Start())
	id := waitForRun(t, db, "generate", store.RunRunning)
	must(t, child.Process.Kill())
	child.Wait()
	out, err := run(context.Background(), "stats", "--db", db)
	if err != nil || !strings.Contains(out, "abandoned") {
		t.Errorf("stats after the kill (err %v):\n%s", err, out)
	}
	s, err := store.OpenExisting(context.Background(), db)
	must(t, err)
	defer s.Close()
	runs, err := s.Runs(context.Background())
	must(t, err)
	if len(runs) != 1 || runs[0].ID != id || runs[0].Status != store.RunAbandoned || runs[0].PID != child.Process.Pid {
		t.Errorf("runs after the kill: %+v; want run %d abandoned, pid %d", runs, id, child.Process.Pid)
	}
}

// Issue 13, the worst finding: a release trusted rules.status and the rule
// text anyone can edit. A proved rule's text and a candidate's status are
// edited with SQL; the release keeps neither, says so, and verify checks
// the edited rule again.
func TestReleaseIgnoresRulesEditedWithSQL(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "r.db")
	verifiedDB(t, db, "ewadd,relu")
	if _, err := run(ctx, "generate", "--max-ops", "2", "--ops", "matmul,transpose", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	proved := queryInt(t, db, "SELECT min(id) FROM rules WHERE status = 'proved'")
	candidate := queryInt(t, db, "SELECT min(id) FROM rules WHERE status = 'candidate'")
	// Twice the target: still well-formed at the same shapes, and false.
	execSQL(t, db, "UPDATE rules SET dst = '(ewadd ' || dst || ' ' || dst || ')' WHERE id = "+strconv.Itoa(proved))
	execSQL(t, db, "UPDATE rules SET status = 'proved' WHERE id = "+strconv.Itoa(candidate))
	out, err := run(ctx, "release", "v1", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "left out, marked proved but with no proof of their current text") || !strings.Contains(out, "rules "+strconv.Itoa(proved)+", "+strconv.Itoa(candidate)) {
		t.Errorf("release did not say what it left out:\n%s", out)
	}
	for _, id := range []int{proved, candidate} {
		if n := queryInt(t, db, "SELECT count(*) FROM version_rules WHERE rule_id = "+strconv.Itoa(id)); n != 0 {
			t.Errorf("rule %d, edited with SQL, was released", id)
		}
	}
	if n := queryInt(t, db, "SELECT count(*) FROM version_rules"); n == 0 {
		t.Error("nothing was released")
	}
	// The edited rule and the candidates are verified; the other proved
	// rules are not.
	want := queryInt(t, db, "SELECT count(*) FROM rules WHERE id = "+strconv.Itoa(proved)+" OR run_id = (SELECT max(id) FROM runs WHERE command = 'generate')")
	verified, err := run(ctx, "verify", "../../axioms", "--db", db, "--no-progress")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(verified, strconv.Itoa(want)+" rules verified") {
		t.Errorf("verify after the edits, want %d rules verified:\n%s", want, verified)
	}
	if s := queryString(t, db, "SELECT status FROM rules WHERE id = "+strconv.Itoa(proved)); s != "refuted" {
		t.Errorf("the edited rule is %s after verify, want refuted", s)
	}
	if commands := queryStrings(t, db, "SELECT command FROM runs ORDER BY id"); !slices.Equal(commands, []string{"generate", "verify", "generate", "release", "verify"}) {
		t.Errorf("runs %v", commands)
	}
}

func queryString(t *testing.T, path, q string) string {
	t.Helper()
	ss := queryStrings(t, path, q)
	if len(ss) != 1 {
		t.Fatalf("%s: %d rows", q, len(ss))
	}
	return ss[0]
}

func queryStrings(t *testing.T, path, q string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	must(t, err)
	defer db.Close()
	rows, err := db.Query(q)
	must(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		must(t, rows.Scan(&s))
		out = append(out, s)
	}
	must(t, rows.Err())
	return out
}

// Issue 13: two verify processes on one database both proved every rule.
// Two real processes now take turns: every rule gets one proof, and the
// later one says which run it waits for.
func TestConcurrentVerifiersDoNotDuplicateProofs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "r.db")
	if _, err := run(context.Background(), "generate", "--max-ops", "3", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	var outs [2]strings.Builder
	var cmds [2]*exec.Cmd
	for i := range cmds {
		cmds[i] = exec.Command(bin, "verify", "../../axioms", "--db", db, "--workers", "1", "--no-progress")
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		must(t, cmds[i].Start())
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("verify %d: %v\n%s", i, err, outs[i].String())
		}
	}
	rules := queryInt(t, db, "SELECT count(*) FROM rules")
	if proofs := queryInt(t, db, "SELECT count(*) FROM proofs"); proofs != rules {
		t.Errorf("%d proofs of %d rules", proofs, rules)
	}
	if dup := queryInt(t, db, "SELECT count(*) FROM (SELECT rule_id FROM proofs GROUP BY rule_id HAVING count(*) > 1)"); dup != 0 {
		t.Errorf("%d rules proved twice", dup)
	}
	both := outs[0].String() + outs[1].String()
	if !strings.Contains(both, "waiting for run ") || !regexp.MustCompile(`(?m)^0 rules verified`).MatchString(both) {
		t.Errorf("no verifier waited for the other and then found nothing left:\n%s\n---\n%s", outs[0].String(), outs[1].String())
	}
}

// Issue 13: a false or contradictory axiom set proved every rule. Two
// axioms that say ewadd returns either operand make any two tensors equal
// (Z3 finds them consistent: a one-tensor model satisfies every equation);
// verify and build now refuse them, writing no proof and no run, and the
// verdict is cached per axiom set.
func TestUnsoundAxiomsAreRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	axiomDir := filepath.Join(dir, "contradiction")
	must(t, os.Mkdir(axiomDir, 0o755))
	must(t, os.WriteFile(filepath.Join(axiomDir, "bad.smt2"), []byte(`; ewadd returns its first operand
(assert (! (forall ((x Tensor) (y Tensor)) (= (ewadd x y) x)) :named ewadd-left))
; ewadd returns its second operand
(assert (! (forall ((x Tensor) (y Tensor)) (= (ewadd x y) y)) :named ewadd-right))
`), 0o644))
	db := filepath.Join(dir, "r.db")
	if _, err := run(ctx, "generate", "--max-ops", "2", "--ops", "ewadd,relu", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify", axiomDir, "--no-progress"}, {"build", "--max-ops", "1", "--axioms", axiomDir, "--no-progress"}} {
		_, err := run(ctx, append(args, "--db", db)...)
		if err == nil || !strings.Contains(err.Error(), "axiom ewadd-left ("+filepath.Join(axiomDir, "bad.smt2")+":2) is false: ") || !strings.Contains(err.Error(), "would prove false rules") ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v", args, err)
		}
	}
	if n := queryInt(t, db, "SELECT count(*) FROM proofs"); n != 0 {
		t.Errorf("%d proofs with contradictory axioms", n)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM runs"); n != 1 {
		t.Errorf("%d runs recorded; want only the generation (build refuses before it generates)", n)
	}
	if v := queryString(t, db, "SELECT checked FROM axiom_sets"); v != "false" {
		t.Errorf("cached verdict %q", v)
	}
	// The cache is what verify asks: a verdict recorded for the built-in
	// set is believed without checking again.
	if _, err := run(ctx, "verify", "../../axioms", "--rule", "1", "--db", db, "--no-progress"); err != nil {
		t.Fatal(err)
	}
	execSQL(t, db, "UPDATE axiom_sets SET checked = 'inconsistent', check_detail = 'cached' WHERE checked = 'sound'")
	if _, err := run(ctx, "verify", "../../axioms", "--db", db, "--no-progress"); err == nil || !strings.Contains(err.Error(), "contradict each other (cached)") {
		t.Errorf("verify did not use the cached verdict: %v", err)
	}
}
