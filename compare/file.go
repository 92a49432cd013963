package compare

import (
	"context"
	"fmt"
	"time"

	"rulebook/exchange"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

// Report relates the rules of a file to a released version and says
// whether our verifier proves them.
type Report struct {
	Version store.Version
	// Ours are the version's rules; Verdicts' steps index them.
	Ours     []store.Rule
	Verdicts []Verdict       // one per rule of the file, in file order
	Proofs   []verify.Result // parallel to Verdicts
	// Skipped summarises what the file's format could not carry over.
	Skipped            []string
	Searched, Verified time.Duration
}

// File reads a rule file in format ("" guesses it, see exchange.ReadFile),
// relates each of its rules to version ref of db (see Compare), and runs
// the verifier that cfg configures on each. progress hears both stages,
// "compare" and "verify".
func File(ctx context.Context, db *store.Store, path, format, ref string, lim Limits, cfg verify.Config, progress func(stage string, done, total int)) (*Report, error) {
	f, _, err := exchange.ReadFile(path, format, cfg.Registry)
	if err != nil {
		return nil, err
	}
	theirs := make([]Foreign, len(f.Rules))
	for i, n := range f.Rules {
		theirs[i] = Foreign{Name: n.Name, Rule: n.Rule}
	}
	r := &Report{Skipped: exchange.SummarizeSkips(f.Skipped, f.Unknown), Proofs: make([]verify.Result, len(theirs))}
	if r.Version, r.Ours, err = db.VersionRules(ctx, ref); err != nil {
		return nil, err
	}
	ours := make([]*rules.Rule, len(r.Ours))
	for i, s := range r.Ours {
		t, err := s.Checked(cfg.Registry)
		if err != nil {
			return nil, fmt.Errorf("version %s: rule %d: %w", r.Version.Tag, s.ID, err)
		}
		ours[i] = t.Rule()
	}
	start := time.Now()
	if r.Verdicts, err = Compare(ctx, ours, theirs, lim, stage(progress, "compare")); err != nil {
		return nil, err
	}
	r.Searched = time.Since(start)
	jobs := make([]verify.Job, len(theirs))
	for i, f := range theirs {
		jobs[i] = verify.Job{ID: int64(i), Rule: f.Rule}
	}
	cfg.Progress = stage(progress, "verify")
	err = verify.Run(ctx, cfg, jobs, func(j verify.Job, res verify.Result) error { r.Proofs[j.ID] = res; return nil })
	r.Verified = time.Since(start) - r.Searched
	return r, err
}

// stage reports one stage's progress, if anyone listens.
func stage(progress func(stage string, done, total int), name string) func(done, total int) {
	if progress == nil {
		return nil
	}
	return func(done, total int) { progress(name, done, total) }
}
