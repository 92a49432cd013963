package enumerate

import (
	"context"
	"fmt"
	"slices"

	"rulebook/fingerprint"
	"rulebook/rules"
)

// Conditioned rules (PET's partially equivalent transformations): a pair
// of graphs whose fingerprints differ over the pool may agree when the
// kernels have other extents, 1×1 say. GenerateConditioned enumerates
// again over the pool with its kernels at those extents and keeps the
// pairs that agree there but differ at the pool's own kernels; each
// becomes a rule conditioned on its kernels' extents, "if (kernel ?b 1 1)".
// It is opt-in (Config.ConditionKernels): a second enumeration, worth
// running at a few operators only.

// conditionedPool is the pool with every rank-4 weight class's spatial
// extents set to dims; classes that become alike (1×3 and 3×1 kernels
// both 1×1) are kept once. It also returns, by the new kernel shape, the
// extents the pool gave it, at which a candidate is tested without its
// condition.
func conditionedPool(p rules.Pool, dims [2]int) (rules.Pool, map[string]rules.Shape) {
	out := p
	out.Classes = nil
	original := map[string]rules.Shape{}
	for _, c := range p.Classes {
		if c.Role == rules.RoleWeight && c.Shape.Rank == 4 {
			k := rules.NewShape(c.Shape.Dims[0], c.Shape.Dims[1], dims[0], dims[1])
			if _, dup := original[k.String()]; dup || c.Shape.SameDims(k) {
				continue
			}
			original[k.String()] = c.Shape
			c.Shape = k
		}
		out.Classes = append(out.Classes, c)
	}
	return out, original
}

// GenerateConditioned returns the rules conditioned on kernels of extents
// dims that cfg's enumeration finds over the conditioned pool.
func GenerateConditioned(ctx context.Context, cfg Config, dims [2]int) (*Result, error) {
	pool, original := conditionedPool(cfg.Pool, dims)
	cfg.Pool, cfg.ConditionKernels = pool, nil
	res, err := Generate(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("conditioned on %dx%d kernels: %w", dims[0], dims[1], err)
	}
	out := &Result{Stats: res.Stats}
	for _, c := range res.Candidates {
		if cond, ok := conditioned(c.Rule, dims, original, cfg.Seed, cfg.Tolerance); ok {
			out.Candidates = append(out.Candidates, Candidate{Rule: cond, Text: cond.Format(), Fingerprint: c.Fingerprint})
		}
	}
	out.Stats.Candidates = int64(len(out.Candidates))
	return out, nil
}

// conditioned makes r, found over the conditioned pool, a rule
// conditioned on its kernels, if it needs the condition: at the pool's
// own kernels both sides type-check and differ. A rule that holds there
// too is no conditioned rule (the plain generation finds it), nor is one
// whose sides do not type-check there (nothing shows the condition is
// what it needs).
func conditioned(r *rules.Rule, dims [2]int, original map[string]rules.Shape, seed uint64, tol float64) (*rules.Rule, bool) {
	var conds []rules.Condition
	at := slices.Clone(r.InputShapes)
	for i, s := range r.InputShapes {
		if o, ok := original[s.String()]; ok {
			conds = append(conds, rules.Condition{Kind: rules.CondKernel, Input: i, Dims: dims})
			at[i] = o
		}
	}
	if len(conds) == 0 || !differsAt(r, at, seed, tol) {
		return nil, false
	}
	c := *r
	c.Conds = conds
	oriented, _ := c.Oriented()
	return oriented, true
}

// differsAt reports whether r's sides, both defined at the input shapes
// at, differ on some float draw.
func differsAt(r *rules.Rule, at []rules.Shape, seed uint64, tol float64) bool {
	in := fingerprint.Inputs{Seed: seed}
	for d := range draws(true) {
		ins := make([]*rules.FloatTensor, len(at))
		for i, s := range at {
			ins[i] = in.Float(fingerprint.Draw(d), i, s)
		}
		src, err1 := rules.Evaluate(&r.Src, rules.FloatKernelOf, ins)
		dst, err2 := rules.Evaluate(&r.Dst, rules.FloatKernelOf, ins)
		if err1 != nil || err2 != nil {
			return false
		}
		for o := range src {
			if !Close(src[o], dst[o], tol) {
				return true
			}
		}
	}
	return false
}
