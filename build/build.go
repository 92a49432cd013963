// Package build runs the whole pipeline in one call. It generates candidate
// rules, verifies and prunes them, and releases the proved ones as a
// version. 'rulebook build' runs it, so a newcomer gets a released, proved
// rulebook from one command. docs/design.md ("Data flow") tells the stages.
package build

import (
	"context"
	"fmt"
	"time"

	"rulebook/axioms"
	"rulebook/enumerate"
	"rulebook/internal/budget"
	"rulebook/internal/progress"
	"rulebook/prune"
	"rulebook/rules"
	"rulebook/store"
	"rulebook/verify"
)

// Config is one build.
type Config struct {
	// Registry verifies and prunes; Ops, if not nil, is the operator set
	// to generate over (else Registry), at Degrees when it has degree
	// parameters (see enumerate.Config).
	Registry *rules.Registry
	Ops      *rules.Registry
	Degrees  []int
	Axioms   *axioms.Set
	MaxOps   int
	// Tag names the version; empty takes the first free v1, v2, ….
	Tag     string
	Seed    uint64
	Workers int
	Budget  verify.Budget
	// Memory bounds what degrees and workers may allocate (see
	// enumerate.CheckMemory).
	Memory budget.Budget
	// ToolVersion is recorded with the runs.
	ToolVersion string
	// Progress hears every stage: generate's by graph size, then "verify",
	// prune's stages, and "prove again" for the rules proved again before
	// they are released.
	Progress progress.Func
	// Waiting, if not nil, hears of an earlier verify run of the same
	// database that the verify stage waits for (see verify.Stored).
	Waiting func(store.Run)
}

// Stage is one step of a build and how long it took.
type Stage struct {
	Name    string
	Elapsed time.Duration
}

// Summary is what a build did, stage by stage.
type Summary struct {
	Generated *enumerate.Generation
	Verified  *verify.Summary
	Pruned    *prune.Result
	Version   store.Version
	Stages    []Stage
}

// Run builds a version into db. A tag that is malformed or already taken,
// and an axiom set that would prove false rules, are refused before any
// work; each stage is recorded in db as its own
// command would record it, so an interrupted build resumes: generation adds
// no duplicates and verification skips the rules already decided under the
// same axioms, solver and budget.
func Run(ctx context.Context, db *store.Store, cfg Config) (*Summary, error) {
	tag, err := chooseTag(ctx, db, cfg.Tag)
	if err != nil {
		return nil, err
	}
	// The verify stage would refuse an unsound axiom set; refusing it
	// before generating spares the user the wait.
	if err := verify.RequireSound(ctx, db, cfg.Registry, cfg.Axioms, cfg.Workers); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	cfg.Budget = cfg.Budget.OrDefault()
	// The release sweeps the rules the verify stage swept: once is enough.
	sweeps := &verify.SweepMemo{}
	sum := &Summary{}
	steps := []struct {
		name string
		run  func() error
	}{
		{"generate", func() (err error) { sum.Generated, err = generate(ctx, db, cfg); return err }},
		{"verify", func() (err error) { sum.Verified, err = verifyNew(ctx, db, cfg, sweeps); return err }},
		{"prune", func() (err error) {
			sum.Pruned, err = prune.Stored(ctx, db, cfg.Registry, cfg.ToolVersion, cfg.Progress)
			return err
		}},
		{"release", func() error { return release(ctx, db, cfg, tag, sweeps, sum) }},
	}
	for _, s := range steps {
		start := time.Now()
		if err := s.run(); err != nil {
			return sum, fmt.Errorf("build: %s: %w", s.name, err)
		}
		sum.Stages = append(sum.Stages, Stage{Name: s.name, Elapsed: time.Since(start)})
	}
	return sum, nil
}

// release proves the rules again and releases them (verify.Release).
func release(ctx context.Context, db *store.Store, cfg Config, tag string, sweeps *verify.SweepMemo, sum *Summary) error {
	r, err := verify.Release(ctx, db, verify.Config{Registry: cfg.Registry, Axioms: cfg.Axioms, Budget: cfg.Budget, Workers: cfg.Workers,
		Seed: cfg.Seed, Progress: cfg.Progress.Stage("prove again"), Sweeps: sweeps}, tag, cfg.ToolVersion)
	if err != nil {
		return err
	}
	sum.Version = r.Version
	return nil
}

// chooseTag checks the requested tag, or picks the next free one.
func chooseTag(ctx context.Context, db *store.Store, tag string) (string, error) {
	if tag == "" {
		return db.NextTag(ctx)
	}
	return tag, db.CheckNewTag(ctx, tag)
}

// VerifyRegistry is the registry that verifies and prunes what ops
// generates: every operator, whatever ops holds, because the axiom files
// (the built-in set included) state properties of both sets. A default
// build's proofs, and so its release, stay what they were: Z3 gets only the
// axioms whose operators can meet a rule's (verify.RelevantAxioms).
func VerifyRegistry() *rules.Registry { return rules.All() }

func generate(ctx context.Context, db *store.Store, cfg Config) (*enumerate.Generation, error) {
	ops := cfg.Ops
	if ops == nil {
		ops = cfg.Registry
	}
	return enumerate.GenerateInto(ctx, db, enumerate.Config{Registry: ops, Pool: rules.DefaultPool(), Degrees: cfg.Degrees, MaxOps: cfg.MaxOps,
		Seed: cfg.Seed, Workers: cfg.Workers, Progress: cfg.Progress, Memory: cfg.Memory}, cfg.ToolVersion)
}

// verifyNew verifies the rules without a result under this build's axioms,
// solver and budget, as 'rulebook verify' does: an unsound axiom set is
// refused, and concurrent verifications take turns.
func verifyNew(ctx context.Context, db *store.Store, cfg Config, sweeps *verify.SweepMemo) (*verify.Summary, error) {
	budget := cfg.Budget
	settings := map[string]any{"axioms": cfg.Axioms.Dir, "axiom_set": cfg.Axioms.Hash, "budget": budget.Units, "timeout": budget.WallClock.String(), "build": true}
	return verify.Stored(ctx, db, verify.Config{Registry: cfg.Registry, Axioms: cfg.Axioms, Budget: budget, Workers: cfg.Workers,
		Seed: cfg.Seed, Progress: cfg.Progress, Sweeps: sweeps}, verify.Request{Settings: settings, ToolVersion: cfg.ToolVersion, Waiting: cfg.Waiting})
}
