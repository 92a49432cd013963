package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rulebook/onnx"
	"rulebook/optimizer"
	"rulebook/runtime"
	"rulebook/store"
)

type optimizeOptions struct {
	rules, output, report string
	opt                   optimizer.Options
	weights               string
	seed                  uint64
}

func newOptimizeCmd() *cobra.Command {
	o := optimizeOptions{opt: optimizer.DefaultOptions}
	cmd := &cobra.Command{
		Use:   "optimize MODEL.onnx --rules TAG|HASH|BUNDLE.json",
		Short: "Rewrite an ONNX model with one pinned rule version (cost-based search)",
		Long: `optimize loads exactly one released rule version, by tag or hash prefix from
the database or from a bundle exported with 'rulebook export --format json'
(no database needed), and refuses a version whose rules do not match its
content hash. It maps the model's operators onto the registry's (the rest
stay opaque: rules never cross them), runs TASO's cost-based backtracking
search with the analytic cost model, and writes the rewritten model and a
JSON report of the rules applied and the cost before and after.`,
		Example: "  rulebook optimize ../shared/models/resnet50.onnx --rules v1 -o resnet50.opt.onnx",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOptimize(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.rules, "rules", "", "rule version: a tag or hash prefix in the database, or an exported bundle (.json)")
	f.StringVarP(&o.output, "output", "o", "", "rewritten model (default MODEL.opt.onnx beside the input)")
	f.StringVar(&o.report, "report", "", "JSON report (default the output with .json)")
	f.Float64Var(&o.opt.Alpha, "alpha", o.opt.Alpha, "keep graphs up to alpha times the best cost")
	f.IntVar(&o.opt.Budget, "budget", o.opt.Budget, "most graphs to expand")
	f.DurationVar(&o.opt.Timeout, "timeout", o.opt.Timeout, "wall-clock limit of the search")
	f.StringVar(&o.weights, "weights", "auto", "auto, file or random (see rulebook run)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of generated weights")
	return cmd
}

func runOptimize(cmd *cobra.Command, path string, o optimizeOptions) error {
	if o.rules == "" {
		return fmt.Errorf("--rules is required: a released version (see 'rulebook versions') or an exported bundle")
	}
	rs, err := loadRuleSet(cmd, o.rules)
	if err != nil {
		return err
	}
	m, err := onnx.ReadModel(path)
	if err != nil {
		return err
	}
	rt, report, err := runtime.FromONNX(m, filepath.Dir(path), runtime.LoadOptions{Weights: runtime.WeightsMode(o.weights), Seed: o.seed})
	if err != nil {
		return err
	}
	if n := len(report.RandomWeights); n > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %d initializers have no data here (weights file absent); using random weights, seed %d\n", n, o.seed)
	}
	g, err := optimizer.FromONNX(m, rt)
	if err != nil {
		return err
	}
	o.opt.Progress = func(p optimizer.Progress) {
		fmt.Fprintf(cmd.ErrOrStderr(), "\r%6.1fs  %5d graphs  best %.3f ms", p.Elapsed.Seconds(), p.Explored, p.Best)
	}
	res, err := optimizer.Optimize(cmd.Context(), g, rs, o.opt)
	fmt.Fprintln(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	out, err := res.Graph.ToONNX()
	if err != nil {
		return err
	}
	if o.output == "" {
		o.output = strings.TrimSuffix(path, filepath.Ext(path)) + ".opt.onnx"
	}
	if o.report == "" {
		o.report = strings.TrimSuffix(o.output, filepath.Ext(o.output)) + ".json"
	}
	if err := onnx.WriteModel(o.output, out); err != nil {
		return err
	}
	if err := writeReport(o.report, path, rs, g, res); err != nil {
		return err
	}
	printOptimization(cmd.OutOrStdout(), rs, g, res, o.output)
	return nil
}

// loadRuleSet takes a bundle file when the reference names one, else a
// version in the database.
func loadRuleSet(cmd *cobra.Command, ref string) (*optimizer.RuleSet, error) {
	if strings.HasSuffix(ref, ".json") {
		if _, err := os.Stat(ref); err == nil {
			return optimizer.LoadBundle(ref)
		}
	}
	db, err := store.Open(cmd.Context(), dbPath(cmd))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return optimizer.LoadVersion(cmd.Context(), db, ref)
}

type appliedRule struct {
	Index int    `json:"index"`
	Rule  string `json:"rule"`
	Count int    `json:"count"`
}

func writeReport(path, model string, rs *optimizer.RuleSet, g *optimizer.Graph, res *optimizer.Result) error {
	applied := appliedRules(rs, res)
	report := map[string]any{
		"model": model, "rules": map[string]any{"version": rs.Version, "hash": rs.Hash, "count": len(rs.Rules)},
		"cost_model": "analytic", "cost_before_ms": res.Before, "cost_after_ms": res.After,
		"speedup": res.Before / res.After, "applied": applied, "opaque": g.Opaque(),
		"search": map[string]any{"explored": res.Explored, "seen": res.Seen, "seconds": res.Elapsed.Seconds(), "stopped": res.Stopped},
	}
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func appliedRules(rs *optimizer.RuleSet, res *optimizer.Result) []appliedRule {
	var out []appliedRule
	for i, n := range res.Applied {
		out = append(out, appliedRule{Index: i, Rule: rs.Texts[i], Count: n})
	}
	sort.Slice(out, func(a, b int) bool {
		return out[a].Count > out[b].Count || out[a].Count == out[b].Count && out[a].Index < out[b].Index
	})
	return out
}

func printOptimization(w io.Writer, rs *optimizer.RuleSet, g *optimizer.Graph, res *optimizer.Result, output string) {
	fmt.Fprintf(w, "rules %s (%.12s, %d rules); modelled cost %.3f ms -> %.3f ms (%.2fx)\n",
		rs.Version, rs.Hash, len(rs.Rules), res.Before, res.After, res.Before/res.After)
	fmt.Fprintf(w, "search: %d graphs expanded, %d seen, %s, stopped: %s\n", res.Explored, res.Seen, res.Elapsed.Round(time.Millisecond), res.Stopped)
	for _, a := range appliedRules(rs, res) {
		fmt.Fprintf(w, "  %3d× %s\n", a.Count, a.Rule)
	}
	var opaque []string
	for op, n := range g.Opaque() {
		opaque = append(opaque, fmt.Sprintf("%s ×%d", op, n))
	}
	sort.Strings(opaque)
	fmt.Fprintf(w, "opaque (rules do not cross): %s\nwrote %s\n", strings.Join(opaque, ", "), output)
}
