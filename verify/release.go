package verify

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"rulebook/internal/progress"
	"rulebook/store"
)

// Released is what a release published and what it would not.
type Released struct {
	Version store.Version
	// LeftOut are the rules that say they are proved but have no proof of
	// their current text (edited with SQL since, or proved before claims).
	LeftOut []int64
	// Refused are the rules whose recorded proof could not be established
	// again from the rule itself, each with why, ordered by id.
	Refused []Unproved
}

// Release publishes the proved rules of db as version tag, each only after
// its proof is established again from the rule itself. A recorded proof is
// a claim, and a claim is a hash anyone can recompute (store.Claim), so it
// vouches for nothing: every candidate (store.Candidate) is proved again,
// under the budget its proof records, against cfg.Axioms (the axiom files,
// not the text the database keeps of them), and held to the same checks at
// other shapes and layouts as verify. A rule proved under another axiom set
// is refused, as is one that is not proved again; the rest are released
// (store.Release; rules an existing version holds make the tag an alias,
// Version.SameAs). The axiom set must pass RequireSound. Re-proving costs
// about what verifying the released rules cost (BENCHMARKS.md, "Releases
// that re-prove").
func Release(ctx context.Context, db *store.Store, cfg Config, tag, toolVersion string) (*Released, error) {
	if err := db.CheckNewTag(ctx, tag); err != nil {
		return nil, err
	}
	if err := cfg.Budget.Check(); err != nil {
		return nil, err
	}
	if err := RequireSound(ctx, db, cfg.Registry, cfg.Axioms, cfg.Workers); err != nil {
		return nil, err
	}
	cands, leftOut, err := db.ReleaseCandidates(ctx)
	if err != nil {
		return nil, err
	}
	out := &Released{LeftOut: leftOut}
	re, err := reestablish(ctx, db, cfg, cands, out)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out.Refused, func(a, b Unproved) int { return int(a.ID - b.ID) })
	v, notReleased, err := db.Release(ctx, tag, toolVersion, re)
	out.Version = v
	out.LeftOut = notReleased
	// The refused are among the rules not released; LeftOut keeps the rest.
	out.LeftOut = slices.DeleteFunc(out.LeftOut, func(id int64) bool { return refused(out.Refused, id) })
	return out, err
}

func refused(us []Unproved, id int64) bool {
	return slices.ContainsFunc(us, func(u Unproved) bool { return u.ID == id })
}

// reestablish proves the candidates again, one Run per recorded budget,
// and returns those proved with the claims they were proved for; the
// others go to out.Refused.
func reestablish(ctx context.Context, db *store.Store, cfg Config, cands []store.Candidate, out *Released) (store.Reestablished, error) {
	re := store.Reestablished{}
	byBudget := map[uint64][]store.Candidate{}
	var budgets []uint64
	byID := map[int64]store.Candidate{}
	total := 0
	for _, c := range cands {
		if c.AxiomSet != cfg.Axioms.Hash {
			out.Refused = append(out.Refused, Unproved{ID: c.Rule.ID, Status: Unknown, Rule: c.Rule.Text.String(),
				Reason: fmt.Sprintf("proved under axiom set %.16s, not %.16s (%s); release with that set's axioms, or verify again", c.AxiomSet, cfg.Axioms.Hash, cfg.Axioms.Dir)})
			continue
		}
		if _, ok := byBudget[c.Budget]; !ok {
			budgets = append(budgets, c.Budget)
		}
		byBudget[c.Budget] = append(byBudget[c.Budget], c)
		byID[c.Rule.ID] = c
		total++
	}
	slices.Sort(budgets)
	done, report := 0, cfg.Progress
	for _, b := range budgets {
		group := byBudget[b]
		rs := make([]store.Rule, len(group))
		for i, c := range group {
			rs[i] = c.Rule
		}
		jobs, err := storedJobs(ctx, db, cfg.Registry, rs)
		if err != nil {
			return nil, err
		}
		for i := range jobs {
			jobs[i].core = group[i].Core
		}
		run := cfg
		run.Budget.Units = b // 0, before budgets were recorded, takes the default
		base := done
		run.Progress = func(s progress.Step) {
			report.Report(progress.Step{Stage: s.Stage, Done: int64(base) + s.Done, Total: int64(total)})
		}
		err = Run(ctx, run, jobs, func(j Job, r Result) error {
			c := byID[j.ID]
			if r.Status == Proved {
				re[j.ID] = c.Claim()
				return nil
			}
			out.Refused = append(out.Refused, Unproved{ID: j.ID, Status: r.Status, Reason: r.Reason, Rule: c.Rule.Text.String()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("release: re-proving: %w", err)
		}
		done += len(group)
	}
	return re, nil
}

// WriteRefused lists the rules a release would not publish.
func (r *Released) WriteRefused(w io.Writer) {
	if len(r.LeftOut) > 0 {
		fmt.Fprintf(w, "left out, marked proved but with no proof of their current text (changed outside rulebook? 'rulebook verify' checks them again): rules %s\n",
			abbreviateIDs(r.LeftOut, 10))
	}
	const shown = 10
	for i, u := range r.Refused {
		if i == shown {
			fmt.Fprintf(w, "… and %d more refused ('rulebook why ID' says more)\n", len(r.Refused)-shown)
			break
		}
		fmt.Fprintf(w, "refused, its proof does not hold when made again: rule %d (%s, %s): %s\n", u.ID, u.Status, u.Reason, u.Rule)
	}
}

// abbreviateIDs joins the first n ids.
func abbreviateIDs(ids []int64, n int) string {
	out := make([]string, min(n, len(ids)))
	for i := range out {
		out[i] = fmt.Sprint(ids[i])
	}
	if len(ids) > n {
		return strings.Join(out, ", ") + fmt.Sprintf(", … (%d more)", len(ids)-n)
	}
	return strings.Join(out, ", ")
}
