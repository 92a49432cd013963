package main

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"rulebook/optimizer"
	"rulebook/store"
)

// recorder keeps an optimize run in the database when there is one: the
// run with its settings, the operator costs measured on the way, and the
// optimization with the rules it applied (for 'rulebook usage').
type recorder struct {
	db     *store.Store
	runID  int64
	device string
	known  map[optimizer.OpKey]float64 // read from the database or measured
	// measured are the costs timed in this run, stored when it ends.
	measured map[optimizer.OpKey]float64
	repeat   int
	// warnings are told the user at the end: the result stands, but
	// something about it is worse than it should be.
	warnings []string
}

// openRecorder opens the database when the rules come from it, --db names
// one, or the default one exists; without one nothing is recorded and
// measured costs last for this run only.
func openRecorder(cmd *cobra.Command, model string, o optimizeOptions) (*recorder, error) {
	threads := o.threads
	if threads < 1 {
		threads = goruntime.GOMAXPROCS(0)
	}
	rec := &recorder{device: fmt.Sprintf("cpu/%d", threads), known: map[optimizer.OpKey]float64{},
		measured: map[optimizer.OpKey]float64{}, repeat: 5}
	path := dbPath(cmd)
	if isBundle(o.rules) && !cmd.Flag("db").Changed && os.Getenv("RULEBOOK_DB") == "" {
		if _, err := os.Stat(path); err != nil {
			return rec, nil
		}
	}
	db, err := store.Open(cmd.Context(), path)
	if err != nil {
		return nil, err
	}
	config, err := json.Marshal(map[string]any{"model": model, "rules": o.rules, "cost": o.cost, "alpha": o.opt.Alpha,
		"budget": o.opt.Budget, "timeout": o.opt.Timeout.String(), "memory_limit_mib": o.memoryMiB, "device": rec.device})
	if err == nil {
		rec.runID, err = db.BeginRun(cmd.Context(), "optimize", string(config), o.seed, version)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("record the run: %w", err)
	}
	rec.db = db
	return rec, nil
}

// measuredCosts is the measured cost model over the database's op_costs
// for this device; what it times on demand is stored when the run ends.
func (r *recorder) measuredCosts(ctx context.Context, threads int) *optimizer.Measured {
	return &optimizer.Measured{Repeat: r.repeat, Threads: threads, Ctx: ctx,
		Known: func(k optimizer.OpKey) (float64, bool) { return r.lookup(ctx, k) },
		Record: func(k optimizer.OpKey, ms float64) {
			r.known[k], r.measured[k] = ms, ms
		}}
}

// lookup finds a configuration's cost among those seen in this run, then
// in the database; a database error is told at the end and the
// configuration is timed again.
func (r *recorder) lookup(ctx context.Context, k optimizer.OpKey) (float64, bool) {
	if ms, ok := r.known[k]; ok {
		return ms, true
	}
	if r.db == nil {
		return 0, false
	}
	c, ok, err := r.db.Cost(ctx, r.device, k.Operator, k.Shapes, k.Params)
	if err != nil {
		r.warn1(fmt.Sprintf("reading operator costs: %v (timed again instead)", err))
	}
	if err != nil || !ok {
		return 0, false
	}
	ms := float64(c.Median) / float64(time.Millisecond)
	r.known[k] = ms
	return ms, true
}

// warn1 keeps a warning once.
func (r *recorder) warn1(w string) {
	if !slices.Contains(r.warnings, w) {
		r.warnings = append(r.warnings, w)
	}
}

// record stores the optimization in the run.
func (r *recorder) record(ctx context.Context, model string, o optimizeOptions, rs *optimizer.RuleSet, res *optimizer.Result) error {
	if r.db == nil {
		return nil
	}
	opt := store.Optimization{RunID: r.runID, Model: model, VersionTag: rs.Version, VersionHash: rs.Hash, CostModel: o.cost,
		Before: res.Before, After: res.After, Explored: res.Explored, Seen: res.Seen, Seconds: res.Elapsed.Seconds(), Stopped: res.Stopped}
	for _, a := range appliedRules(rs, res) {
		opt.Uses = append(opt.Uses, store.RuleUse{Rule: a.Rule, Count: a.Count})
	}
	_, err := r.db.RecordOptimization(ctx, opt)
	return err
}

// opCosts are the costs timed in this run, in key order.
func (r *recorder) opCosts() []store.OpCost {
	keys := slices.SortedFunc(maps.Keys(r.measured), func(a, b optimizer.OpKey) int {
		return cmp.Or(cmp.Compare(a.Operator, b.Operator), cmp.Compare(a.Shapes, b.Shapes), cmp.Compare(a.Params, b.Params))
	})
	costs := make([]store.OpCost, len(keys))
	for i, k := range keys {
		costs[i] = store.OpCost{Device: r.device, Operator: k.Operator, Shapes: k.Shapes, Params: k.Params,
			Median: time.Duration(r.measured[k] * float64(time.Millisecond)), Repeats: r.repeat, RunID: r.runID, MeasuredAt: time.Now()}
	}
	return costs
}

// finish stores the costs timed in this run, which hold whether or not
// the run succeeded, ends the run as err says and returns err.
func (r *recorder) finish(ctx context.Context, err error) error {
	if r.db == nil {
		return err
	}
	if len(r.measured) > 0 {
		if cerr := r.db.RecordCosts(context.WithoutCancel(ctx), r.opCosts()); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	return finishRun(ctx, r.db, store.Run{ID: r.runID, Status: store.RunDone, Stored: 1}, err)
}

// warn tells the warnings gathered on the way.
func (r *recorder) warn(w io.Writer) {
	for _, msg := range r.warnings {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}

func (r *recorder) close() {
	if r.db != nil {
		r.db.Close()
	}
}

func newUsageCmd() *cobra.Command {
	var ref, format string
	cmd := &cobra.Command{
		Use:   "usage [--version TAG|HASH] [--format text|csv|json]",
		Short: "Show how often each rule was applied across optimized models (heat map)",
		Long: `usage reads the optimizations that 'rulebook optimize MODEL.onnx --db DB'
recorded and shows, for the latest optimization of each model, how often it
applied each rule (TASO's Fig. 2.10). Models are told apart by the base name
of their path; rules by their canonical text, so that optimizations with a
bundle exported from another database count too.

--version keeps the optimizations made with one released version of this
database (by tag or hash prefix, as in 'rulebook diff'); without it every
version counts, each model's latest optimization with whichever it used.

text prints a heat map: one row per rule, most applied first, one column
per model (its file name without .onnx) and a total. Each cell holds the
count and a shade, ░ ▒ ▓ █, by quarters of the largest count; empty cells
mean the rule was not applied. Long rules are cut with "…". csv prints
rule,model,count rows and json an array of {"rule","model","count"} objects,
with the model's file name, sorted by rule then model.`,
		Example: `  rulebook optimize resnet50.onnx --rules v1 --db rulebook.db
  rulebook usage
  rulebook usage --version v1 --format csv > usage.csv`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			switch format {
			case "text", "csv", "json":
				return nil
			}
			return fmt.Errorf("--format must be text, csv or json, got %q", format)
		},
		RunE: withStore(func(cmd *cobra.Command, _ []string, db *store.Store) error {
			return runUsage(cmd, db, ref, format)
		}),
	}
	cmd.Flags().StringVar(&ref, "version", "", "only optimizations with this version (tag or hash prefix)")
	cmd.Flags().StringVar(&format, "format", "text", "text, csv or json")
	return cmd
}

func runUsage(cmd *cobra.Command, db *store.Store, ref, format string) error {
	hash, err := versionHash(cmd.Context(), db, ref)
	if err != nil {
		return err
	}
	uses, err := db.Usage(cmd.Context(), hash)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch format {
	case "csv":
		return writeUsageCSV(out, uses)
	case "json":
		return writeUsageJSON(out, uses)
	}
	if len(uses) == 0 {
		_, err := fmt.Fprintln(out, noUsageMessage(db.Path(), ref))
		return err
	}
	return writeHeatMap(out, buildHeatMap(uses))
}

// versionHash resolves --version as the other version commands do; "" keeps
// every version.
func versionHash(ctx context.Context, db *store.Store, ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	v, _, err := db.LoadVersion(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("--version: %w", err)
	}
	return v.Hash, nil
}

func noUsageMessage(path, ref string) string {
	if ref != "" {
		return fmt.Sprintf("no optimizations with version %s recorded in %s; run 'rulebook optimize ... --rules %s --db %s' first", ref, path, ref, path)
	}
	return fmt.Sprintf("no optimizations recorded in %s; run 'rulebook optimize ... --db %s' first", path, path)
}

// writeUsageCSV leaves write errors to cw.Error: csv.Writer buffers, and
// keeps the first error for Flush to report.
func writeUsageCSV(w io.Writer, uses []store.Usage) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"rule", "model", "count"})
	for _, u := range uses {
		cw.Write([]string{u.Rule, u.Model, strconv.Itoa(u.Count)})
	}
	cw.Flush()
	return cw.Error()
}

type usageJSON struct {
	Rule  string `json:"rule"`
	Model string `json:"model"`
	Count int    `json:"count"`
}

func writeUsageJSON(w io.Writer, uses []store.Usage) error {
	out := make([]usageJSON, len(uses)) // [] rather than null when empty
	for i, u := range uses {
		out[i] = usageJSON(u)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // rules read "=>", not "=\u003e"
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// heatMap is the usage as a rules × models matrix.
type heatMap struct {
	models []string // base names, sorted
	rows   []heatRow
	max    int // the largest cell, which gets the darkest shade
}

type heatRow struct {
	rule   string
	counts []int // by models' index
	total  int
}

// buildHeatMap orders the rows by total, most applied first, then text.
func buildHeatMap(uses []store.Usage) heatMap {
	var h heatMap
	for _, u := range uses {
		if !slices.Contains(h.models, u.Model) {
			h.models = append(h.models, u.Model)
		}
	}
	slices.Sort(h.models)
	byRule := map[string]*heatRow{}
	for _, u := range uses {
		r := byRule[u.Rule]
		if r == nil {
			r = &heatRow{rule: u.Rule, counts: make([]int, len(h.models))}
			byRule[u.Rule] = r
		}
		c := &r.counts[slices.Index(h.models, u.Model)]
		*c += u.Count
		r.total += u.Count
		h.max = max(h.max, *c)
	}
	for _, r := range byRule {
		h.rows = append(h.rows, *r)
	}
	slices.SortFunc(h.rows, func(a, b heatRow) int {
		return cmp.Or(cmp.Compare(b.total, a.total), strings.Compare(a.rule, b.rule))
	})
	return h
}

// ruleWidth is the most a rule's text may take, so that a heat map of a few
// models fits a terminal.
const ruleWidth = 60

// shades darken with the count; index 0 is for an empty cell.
const shades = " ░▒▓█"

func writeHeatMap(w io.Writer, h heatMap) error {
	rw := utf8.RuneCountInString("RULE")
	for _, r := range h.rows {
		rw = max(rw, min(ruleWidth, utf8.RuneCountInString(r.rule)))
	}
	cw := len(strconv.Itoa(h.max)) + 1 // count and shade
	widths := make([]int, len(h.models))
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", rw, "RULE")
	for i, m := range h.models {
		name := strings.TrimSuffix(m, ".onnx")
		widths[i] = max(cw, utf8.RuneCountInString(name))
		fmt.Fprintf(&b, "  %*s", widths[i], name)
	}
	tw := max(len("TOTAL"), len(strconv.Itoa(h.rows[0].total)))
	fmt.Fprintf(&b, "  %*s\n", tw, "TOTAL")
	for _, r := range h.rows {
		fmt.Fprintf(&b, "%-*s", rw, truncate(r.rule, rw))
		for i, n := range r.counts {
			fmt.Fprintf(&b, "  %*s", widths[i], h.cell(n))
		}
		fmt.Fprintf(&b, "  %*d\n", tw, r.total)
	}
	fmt.Fprintf(&b, "%d rules applied in %d models; shades ░ ▒ ▓ █ by quarters of the largest count, %d\n", len(h.rows), len(h.models), h.max)
	_, err := io.WriteString(w, b.String())
	return err
}

// cell renders a count with its shade, blank when the rule was not applied.
func (h heatMap) cell(n int) string {
	if n == 0 {
		return ""
	}
	level := (4*n + h.max - 1) / h.max // 1..4: quarters, rounded up
	return strconv.Itoa(n) + string([]rune(shades)[level])
}

// truncate cuts s to width runes, marking the cut with "…".
func truncate(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}
