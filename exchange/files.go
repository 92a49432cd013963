package exchange

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"rulebook/internal/infile"
	"rulebook/internal/outfile"
	"rulebook/rules"
	"rulebook/store"
)

// ReadFileContext is ReadFile for a command that Ctrl-C may stop: reading
// FlexFlow's parallel rules takes a while (each rule's layouts are
// searched), and a command stopped meanwhile must go no further and write
// nothing, so a done ctx is the error.
func ReadFileContext(ctx context.Context, path, format string, reg *rules.Registry) (*Foreign, string, error) {
	type read struct {
		f      *Foreign
		format string
		err    error
	}
	// Reading is CPU work without a place to stop (a FlexFlow file of 640
	// rules takes a second on a busy machine): when ctx ends first, the
	// read is left to finish on its own and its result dropped.
	done := make(chan read, 1)
	go func() {
		f, format, err := ReadFile(path, format, reg)
		done <- read{f, format, err}
	}()
	select {
	case <-ctx.Done():
		return nil, "", ctx.Err()
	case r := <-done:
		if r.err != nil {
			return nil, "", r.err
		}
		return r.f, r.format, nil
	}
}

// ReadFile reads a rule file in format, or in the one GuessFormat sees
// when format is "", and says which format that was.
func ReadFile(path, format string, reg *rules.Registry) (*Foreign, string, error) {
	data, err := infile.ReadFile(path, infile.RuleFile)
	if err != nil {
		return nil, "", err
	}
	if format == "" {
		format = GuessFormat(path, data)
	}
	f, err := Read(path, data, reg, format)
	return f, format, err
}

// Import adds the rules read from path, oriented and canonical, to db in
// one transaction, as candidates of an "import" run that records the
// file; each rule keeps its name in the file as its origin. It returns the
// run and how many of the rules were new.
func Import(ctx context.Context, db *store.Store, f *Foreign, path, format, toolVersion string) (runID, added int64, err error) {
	config, err := json.Marshal(map[string]any{"file": path, "format": format, "rules": len(f.Rules), "skipped": len(f.Skipped)})
	if err == nil {
		runID, err = db.BeginRun(ctx, "import", string(config), 0, toolVersion)
	}
	if err != nil {
		return 0, 0, err
	}
	records := make([]store.Rule, len(f.Rules))
	for i, n := range f.Rules {
		_, text := n.Rule.Oriented()
		records[i] = store.NewRule(text)
		records[i].Origin, records[i].RunID = n.Name, runID
	}
	added, err = db.InsertRules(ctx, records)
	run := store.Run{ID: runID, Status: store.RunDone, Candidates: int64(len(records)), Stored: added}
	return runID, added, db.EndRun(ctx, run, err)
}

// Export writes the rules of a released version v (its rules stored) that
// sel picks in format: json, sexpr, dot, or TASO's ("taso-pb") or
// FlexFlow's ("flexflow-json"), and returns the rules those two cannot
// carry, named by their ids in the store. A selection's header names the
// version but not its content hash, which only the whole version has. A
// dot picture holds at most MaxPictureRules rules.
func Export(w io.Writer, reg *rules.Registry, format string, v store.Version, stored []store.Rule, sel Selection) ([]Skip, error) {
	picked, err := sel.Pick(v, stored)
	if err != nil {
		return nil, err
	}
	if format == "dot" && len(picked) > MaxPictureRules {
		return nil, tooManyToDraw(v, len(picked), sel)
	}
	rs := make([]rules.Text, len(picked))
	ids := make([]int64, len(picked))
	for i, r := range picked {
		rs[i], ids[i] = r.Text, r.ID
	}
	h := Header{Version: v.Tag, Hash: v.Hash}
	if !sel.All() {
		h.Hash = ""
	}
	switch format {
	case "json":
		return nil, WriteJSON(w, h, rs)
	case "sexpr":
		return nil, WriteSexpr(w, h, rs)
	case "dot":
		return nil, WriteDot(w, reg, versionPicture(v, stored, picked))
	case "taso-pb", "flexflow-json":
		return writeForeign(w, reg, format, rs, ids, max(sel.Degree, rules.BaseDegree))
	}
	return nil, fmt.Errorf("export: unknown format %q", format)
}

// tooManyToDraw says that n rules make a picture nobody can read, and how
// to pick fewer.
func tooManyToDraw(v store.Version, n int, sel Selection) error {
	what := fmt.Sprintf("version %s's %d rules", v.Tag, n)
	if !sel.All() {
		what = fmt.Sprintf("the %d rules %s selects", n, sel)
	}
	return fmt.Errorf("--format dot: %s are too many for a readable picture (at most %d); pick fewer with --id (--id 12,53) or --op (--op conv2d,split)", what, MaxPictureRules)
}

// writeForeign writes rs in TASO's or FlexFlow's format and names the
// rules they cannot carry by ids rather than by position.
func writeForeign(w io.Writer, reg *rules.Registry, format string, rs []rules.Text, ids []int64, degree int) ([]Skip, error) {
	parsed := make([]*rules.Rule, len(rs))
	for i, r := range rs {
		checked, err := r.Checked(reg)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", ids[i], err)
		}
		parsed[i], _ = checked.Rule().Oriented()
	}
	var skipped []Skip
	var err error
	if format == "taso-pb" {
		skipped, err = WriteTASO(w, parsed)
	} else {
		skipped, err = WriteFlexFlowAt(w, parsed, degree)
	}
	// The writers name rules by position ("rule 3").
	for i, s := range skipped {
		var k int
		if _, err := fmt.Sscanf(s.Name, "rule %d", &k); err == nil && k >= 1 && k <= len(ids) {
			skipped[i].Name = fmt.Sprint(ids[k-1])
		}
	}
	return skipped, err
}

// WriteFile writes an export to path through write (outfile.Write): the
// file appears only once it is complete, a failed write leaves whatever
// was there before, and a path that names anything but a regular file or
// a new name is refused.
func WriteFile(path string, write func(io.Writer) error) error {
	return outfile.Write(path, write)
}
