package exchange

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"rulebook/rules"
	"rulebook/store"
)

// ReadFile reads a rule file in format, or in the one GuessFormat sees
// when format is "", and says which format that was.
func ReadFile(path, format string, reg *rules.Registry) (*Foreign, string, error) {
	data, err := os.ReadFile(path)
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

// WriteForeign writes rs in TASO's format ("taso-pb") or FlexFlow's
// ("flexflow-json") and returns the rules those cannot carry, named by
// ids, the rules' ids in the store, rather than by position.
func WriteForeign(w io.Writer, reg *rules.Registry, format string, rs []rules.Text, ids []int64) ([]Skip, error) {
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
		skipped, err = WriteFlexFlow(w, parsed)
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
