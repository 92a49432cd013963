package plan

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"rulebook/cluster"
	"rulebook/internal/english"
	"rulebook/internal/safetext"
	"rulebook/training"
	"rulebook/version"
)

// Simulated is the warning every printed or written plan carries.
const Simulated = "simulated: no step was run; times come from rulebook's task-graph simulator"

// Choice is every strategy priced for one model on one machine, and
// the one chosen: the fastest that fits in memory.
type Choice struct {
	Model   string
	Machine cluster.Machine
	Batch   int64
	Options Options
	Results []*Result // in Kinds order; a family's best candidate only
	Chosen  *Result
	// Fits is false when no strategy fits in memory; Chosen then needs the
	// least.
	Fits bool
	// Rules is the pinned rule version the header names, or nil.
	Rules *version.Set
	// Citations are the rules the joint family's plan applies; JointNote
	// says why the joint family was not searched.
	Citations *Citations
	JointNote string
	// LeverOptions are, when the chosen strategy needs a memory lever,
	// each allowed lever family's fastest fitting plan for it alone.
	LeverOptions []LeverOption
}

// Choose prices each family of kinds on the machine (for the grid and
// pipeline families every candidate, keeping the fastest that fits) and
// chooses among them.
func Choose(ctx context.Context, g *training.Graph, kinds []Kind, o Options) (*Choice, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	g = o.graph(g)
	c := &Choice{Model: g.Model, Machine: o.Machine, Batch: g.Batch, Options: o}
	families := make([][]*Result, len(kinds))
	for f, k := range kinds {
		if k == Joint && !o.Substitutions.searchable() {
			c.JointNote = o.Substitutions.why()
			if len(kinds) == 1 {
				return nil, fmt.Errorf("--strategy joint: %s", c.JointNote)
			}
			continue
		}
		if k == Embedding && len(lookups(g)) == 0 {
			if len(kinds) == 1 {
				return nil, fmt.Errorf("--strategy emb: %w", ErrNoTables)
			}
			continue
		}
		var skipped *Result
		for _, s := range candidates(k, o.Machine.NumDevices(), o.Machine.DevicesPerNode, o.Microbatches) {
			if s.Embedding != "" && len(lookups(g)) == 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			r, err := Price(ctx, g, s, o)
			if err != nil {
				return nil, err
			}
			if r.Err != nil {
				skipped = r
				continue
			}
			families[f] = append(families[f], r)
		}
		if len(families[f]) == 0 && skipped != nil {
			families[f] = []*Result{skipped}
		}
	}
	if err := relieveAll(ctx, g, families, o); err != nil {
		return nil, err
	}
	for _, rs := range families {
		if len(rs) > 0 {
			r, _ := best(rs)
			c.Results = append(c.Results, r)
		}
	}
	var priced []*Result
	for _, r := range c.Results {
		if r.Err == nil {
			priced = append(priced, r)
		}
	}
	if len(priced) == 0 {
		return nil, noneRuns(c.Results)
	}
	c.Chosen, c.Fits = best(priced)
	for _, r := range c.Results {
		if r.Strategy.Kind == Joint && r.Err == nil {
			c.Citations = o.Substitutions.cite(g, r)
		}
	}
	if c.Fits {
		var err error
		if c.LeverOptions, err = leverOptions(ctx, g, c.Chosen.Strategy, o); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// NoneRunsError says why no strategy of any family could be priced.
type NoneRunsError struct{ Results []*Result }

func (e *NoneRunsError) Error() string {
	parts := make([]string, len(e.Results))
	for i, r := range e.Results {
		parts[i] = fmt.Sprintf("%s (%s): %v", r.Strategy.Kind, layoutText(r.Strategy), r.Err)
	}
	return "no strategy can run this step: " + strings.Join(parts, "; ")
}

// Unwrap gives each family's reason, for errors.Is.
func (e *NoneRunsError) Unwrap() []error {
	errs := make([]error, len(e.Results))
	for i, r := range e.Results {
		errs[i] = r.Err
	}
	return errs
}

// noneRuns is the reason itself when one family was asked for.
func noneRuns(rs []*Result) error {
	if len(rs) == 1 {
		return rs[0].Err
	}
	return &NoneRunsError{Results: rs}
}

// WriteTable prints every strategy priced, one per line, and says which
// was chosen and that the times are simulated.
func (c *Choice) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "%s on %s (%s), batch %d: %s\ncost model: %s; attention %s\n", safetext.Name(c.Model), safetext.Name(c.Machine.Name), english.Nouns(c.Machine.NumDevices(), "device"), c.Batch, Simulated, c.Options.CostModel(), c.Options.attention())
	if c.Rules != nil {
		use := fmt.Sprintf("%d parallel rules; the joint search applies them", c.Rules.ParallelRules())
		if c.Rules.ParallelRules() == 0 {
			use = "no parallel rules in it, so only the classic strategies (dp, tp, grid, pp, emb) are priced"
		}
		fmt.Fprintf(w, "rules: %s, pinned; %s\n", safetext.Name(c.Rules.Describe()), use)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tlayout\tstep (simulated)\tcompute\texposed comm\tidle\tmemory/device\tfits\t")
	var notes []string
	for _, r := range c.Results {
		if r.Err != nil {
			fmt.Fprintf(tw, "%s\t%s\tnot priced¹\t\t\t\t\t\t\n", r.Strategy.Kind, layoutText(r.Strategy))
			notes = append(notes, fmt.Sprintf("¹ %s: %s", r.Strategy.Kind, r.Err))
			continue
		}
		mark := ""
		if r == c.Chosen {
			mark = " *"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Strategy.Kind, mark, layoutText(r.Strategy),
			ms(r.Time.Step), ms(r.Time.Compute), ms(r.Time.ExposedCommunication), ms(r.Time.Idle), gib(r.Memory.Total()), yesNo(r.Fits))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	if c.JointNote != "" && c.Rules == nil {
		fmt.Fprintf(w, "joint: not searched: %s\n", c.JointNote)
	}
	if c.Citations != nil {
		if err := c.Citations.Write(w); err != nil {
			return err
		}
		if line := c.jointAgainstClassic(); line != "" {
			fmt.Fprintln(w, line)
		}
	}
	limit := c.Options.memoryLimit()
	if !c.Fits {
		_, err := fmt.Fprintf(w, "no strategy fits in %s per device; the one needing least memory is shown\n", gib(limit))
		return err
	}
	if _, err := fmt.Fprintf(w, "* chosen: %s, %s per step (simulated), %s of %s per device\n", c.Chosen.Strategy, ms(c.Chosen.Time.Step), gib(c.Chosen.Memory.Total()), gib(limit)); err != nil {
		return err
	}
	for _, l := range c.Chosen.Strategy.leverNames() {
		if _, err := fmt.Fprintf(w, "  memory lever (it does not fit without): %s\n", l); err != nil {
			return err
		}
	}
	return c.writeLeverOptions(w)
}

// jointAgainstClassic says how the joint plan compares with the fastest
// classic plan that fits: the same plan, or by how much it is faster and
// how it is laid out differently.
func (c *Choice) jointAgainstClassic() string {
	var joint, classic *Result
	for _, r := range c.Results {
		switch {
		case r.Err != nil || !r.Fits:
		case r.Strategy.Kind == Joint:
			joint = r
		case classic == nil || r.Time.Step < classic.Time.Step:
			classic = r
		}
	}
	if joint == nil || classic == nil {
		return ""
	}
	if joint.Time.Step >= classic.Time.Step {
		return fmt.Sprintf("joint against the best classic plan: no faster than %s %s (%s, simulated)", classic.Strategy.Kind, layoutText(classic.Strategy), ms(classic.Time.Step))
	}
	return fmt.Sprintf("joint against the best classic plan: %.2f× faster (simulated), %s (%s) against %s %s (%s)",
		classic.Time.Step/joint.Time.Step, layoutText(joint.Strategy), ms(joint.Time.Step), classic.Strategy.Kind, layoutText(classic.Strategy), ms(classic.Time.Step))
}

func layoutText(s Strategy) string {
	if s.Embedding != "" {
		return fmt.Sprintf("dp%d", s.DP) + s.embeddingLabel() + s.levers()
	}
	t := fmt.Sprintf("dp%d×tp%d", s.DP, s.TP)
	if s.PP > 1 {
		t += fmt.Sprintf("×pp%d/m%d", s.PP, s.Microbatches)
	}
	return t + s.levers()
}

func ms(seconds float64) string { return fmt.Sprintf("%.2f ms", seconds*1e3) }
func gib(bytes float64) string  { return fmt.Sprintf("%.2f GiB", bytes/(1<<30)) }
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// WriteExplain prints what priced each operator of the chosen plan: its
// simulated forward and backward on the device for one micro-batch on one
// device of its stage (the forward with autocast's weight copy, made once
// a step), the host's time launching them, and whether a profile match, a
// fit or the roofline gave them.
func (c *Choice) WriteExplain(w io.Writer, g *training.Graph) error {
	r := c.Chosen
	fmt.Fprintf(w, "operator costs of %s, one micro-batch on one device (simulated, %s):\n", r.Strategy, c.Options.CostModel())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "operator\ttype\tforward\tbackward\thost launches\tsource\t")
	counts := map[Source]int{}
	for i, op := range g.Ops {
		t := r.Costs[i]
		if t.Source == "" {
			continue
		}
		counts[t.Source]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", safetext.Name(op.Name), safetext.Name(op.Type), us(t.Forward+t.Cast), us(t.Backward),
			us(t.Launch+t.CastLaunch+t.BackwardLaunch), t.Source)
	}
	if r.Optimizer.Source != "" {
		fmt.Fprintf(tw, "optimizer step (Adam)\t\t%s\t\t\t%s\t\n", us(r.Optimizer.Forward), r.Optimizer.Source)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "priced by: %d profile, %d fit, %d roofline\n", counts[FromProfile], counts[FromFit], counts[FromRoofline])
	return err
}

func us(seconds float64) string { return fmt.Sprintf("%.1f µs", seconds*1e6) }
