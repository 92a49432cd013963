package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rulebook/axioms"
	"rulebook/rules"
)

// checkReadmeSample compares the README's sample output of command (the
// block that starts "$ command") with what the command printed, line by
// line, times and the database's path aside: the counts and hashes the
// README quotes cannot go stale (issue 25).
func checkReadmeSample(t *testing.T, command, printed string) {
	t.Helper()
	sample := readmeSample(t, command)
	if len(sample) == 0 {
		t.Errorf("README.md has no sample output of %q", command)
		return
	}
	got := map[string]bool{}
	for _, line := range strings.Split(printed, "\n") {
		got[comparable(line)] = true
	}
	for _, line := range sample {
		if !got[comparable(line)] {
			t.Errorf("README.md's sample of %q says %q, which %q did not print:\n%s", command, line, command, printed)
		}
	}
}

var (
	timeColumn = regexp.MustCompile(`\s+[0-9.]+(ms|s|m[0-9.]+s)$`)
	dbPathTail = regexp.MustCompile(`, in \S+$`)
	longHash   = regexp.MustCompile(`\b([0-9a-f]{16})[0-9a-f]*…?`)
)

// comparable is a line with its time column and database path dropped,
// hashes cut to 16 digits and runs of spaces made one.
func comparable(line string) string {
	line = timeColumn.ReplaceAllString(strings.TrimSpace(line), "")
	line = dbPathTail.ReplaceAllString(line, "")
	line = longHash.ReplaceAllString(line, "$1")
	return strings.Join(strings.Fields(line), " ")
}

// readmeSample is the output lines of the README block that starts with
// "$ command".
func readmeSample(t *testing.T, command string) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	must(t, err)
	lines := strings.Split(string(data), "\n")
	for i, line := range lines {
		if line != "$ "+command {
			continue
		}
		var out []string
		for _, l := range lines[i+1:] {
			if strings.HasPrefix(l, "```") {
				break
			}
			out = append(out, l)
		}
		return out
	}
	return nil
}

// The counts the README's prose quotes match the repository (issue 25:
// "59 axioms", "three" wrong fixtures and a dot export of a whole version
// had gone stale): the axioms in axioms/, the wrong axioms in its
// testdata, and the ≤3-operator release with 1×1 conditions in
// optimizer/testdata.
func TestReadmeCountsMatchTheRepository(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	must(t, err)
	readme := strings.Join(strings.Fields(string(data)), " ")
	set, err := axioms.Load("../../axioms", rules.All())
	must(t, err)
	wrong, err := filepath.Glob("../../axioms/testdata/wrong/*.smt2")
	must(t, err)
	var bundle struct {
		Rules []struct {
			Cond json.RawMessage `json:"cond"`
		} `json:"rules"`
	}
	raw, err := os.ReadFile("../../optimizer/testdata/rules-3ops-1x1.json")
	must(t, err)
	must(t, json.Unmarshal(raw, &bundle))
	conditioned := 0
	for _, r := range bundle.Rules {
		if len(r.Cond) > 0 && string(r.Cond) != "null" {
			conditioned++
		}
	}
	words := []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	number := func(n int) string {
		if n < len(words) {
			return words[n]
		}
		return fmt.Sprint(n)
	}
	for _, want := range []string{
		"`axioms/` holds " + fmt.Sprint(len(set.Axioms)) + " operator properties",
		"holds " + number(len(wrong)) + " deliberately wrong axioms",
		fmt.Sprint(len(bundle.Rules)) + " released, " + fmt.Sprint(conditioned) + " of them conditioned",
		"axiom set " + set.Hash,
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	if regexp.MustCompile(`--format json -o v1\.json\s+# or sexpr, dot`).MatchString(string(data)) {
		t.Error("README.md offers --format dot for a whole version, which export refuses above 40 rules")
	}
}
