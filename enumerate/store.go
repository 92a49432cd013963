package enumerate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"rulebook/rules"
	"rulebook/store"
)

// Generation is a generation written to the store.
type Generation struct {
	*Result
	RunID int64
	// New counts the candidates the store did not hold yet.
	New int64
}

// GenerateInto enumerates as cfg says, as a "generate" run of db recorded
// with its settings and toolVersion, and stores the candidate rules in one
// transaction: a generation that fails or is interrupted writes none, and
// its run says how it ended.
func GenerateInto(ctx context.Context, db *store.Store, cfg Config, toolVersion string) (*Generation, error) {
	settings := map[string]any{"max_ops": cfg.MaxOps, "ops": cfg.Registry.Names(), "pool": cfg.Pool.String(),
		"exhaustive": cfg.Exhaustive, "workers": cfg.Workers}
	if cfg.Degrees != nil {
		settings["degrees"] = cfg.Degrees
		pools := map[int]string{}
		for _, d := range cfg.Degrees {
			pools[d] = rules.ParallelPool(d).String()
		}
		settings["pool"] = pools
	}
	config, err := json.Marshal(settings)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	out := &Generation{}
	if out.RunID, err = db.BeginRun(ctx, "generate", string(config), cfg.Seed, toolVersion); err != nil {
		return nil, err
	}
	run := store.Run{ID: out.RunID, Status: store.RunDone}
	if out.Result, err = Generate(ctx, cfg); err != nil {
		err = fmt.Errorf("generate: %w", err)
	} else {
		out.New, err = db.InsertRules(ctx, RuleRecords(out.Candidates, out.RunID))
		s := out.Stats
		run.Graphs, run.Classes, run.Collisions, run.Candidates, run.Stored = s.Graphs, s.Classes, s.Collisions, int64(len(out.Candidates)), out.New
	}
	if err = db.EndRun(ctx, run, err); err != nil {
		if store.EndStatus(err) == store.RunInterrupted {
			return nil, fmt.Errorf("interrupted: run %d recorded as interrupted, no rules written: %w", out.RunID, err)
		}
		return nil, err
	}
	return out, nil
}

// RuleRecords are the candidates as the store keeps them, found by run
// runID.
func RuleRecords(cands []Candidate, runID int64) []store.Rule {
	out := make([]store.Rule, len(cands))
	for i, c := range cands {
		out[i] = store.NewRule(c.Text)
		out[i].Fingerprint, out[i].RunID = c.Fingerprint, runID
	}
	return out
}

// WriteText prints the generation's stages as 'rulebook generate' does.
func (s *Generation) WriteText(w io.Writer, elapsed time.Duration) {
	st := s.Stats
	fmt.Fprintf(w, "%-28s %12s\n", "stage", "count")
	fmt.Fprintf(w, "%-28s %12d\n", "graphs enumerated", st.Graphs)
	for _, l := range st.Levels {
		fmt.Fprintf(w, "  %-26s %12d\n", fmt.Sprintf("with %d operators", l.Ops), l.Graphs)
	}
	fmt.Fprintf(w, "%-28s %12d\n", "distinct fingerprints", st.Classes)
	fmt.Fprintf(w, "%-28s %12d\n", "fingerprint collisions", st.Collisions)
	fmt.Fprintf(w, "%-28s %12d\n", "pairs after float test", st.Candidates)
	fmt.Fprintf(w, "%-28s %12d\n", "distinct candidate rules", len(s.Candidates))
	if len(st.Degrees) > 1 {
		fmt.Fprintf(w, "  %-26s %12d\n", "generalised to degree d", st.Generalised)
	}
	fmt.Fprintf(w, "%-28s %12d\n", "stored (new)", s.New)
	fmt.Fprintf(w, "%-28s %12s\n", "time", elapsed.Round(time.Millisecond))
}

// OverDegrees reports whether a run generated over parallel degrees
// (Config.Degrees): its rules are claimed at every parallel layout.
func OverDegrees(run store.Run) bool {
	if run.Command != "generate" {
		return false
	}
	var settings struct {
		Degrees []int `json:"degrees"`
	}
	return json.Unmarshal([]byte(run.Config), &settings) == nil && len(settings.Degrees) > 0
}
