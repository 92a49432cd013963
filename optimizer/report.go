package optimizer

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"rulebook/internal/outfile"
	"rulebook/internal/safetext"
	"rulebook/runtime"
	"rulebook/store"
	"rulebook/version"
)

// Report is the JSON report of one optimization, as 'rulebook optimize'
// writes it; docs/optimize-report.md documents every field. Its field
// names and order are the file's layout: scripts and benchmarks read it,
// so fields are added, never renamed or moved. Lists are empty, never
// null.
type Report struct {
	Model     string      `json:"model"`
	Rules     ReportRules `json:"rules"`
	CostModel string      `json:"cost_model"`
	// CostUnit is the unit of every cost the report gives in "…_ms"
	// fields under the cost model: "model ms" for analytic costs, an
	// estimate not comparable with times measured on a machine, "ms"
	// for measured ones (see CostUnit).
	CostUnit string `json:"cost_unit"`
	// Device is the device the costs are for: what measured costs ran
	// on, or what the analytic model models ("cpu/2", "cuda/NVIDIA H200").
	Device  string         `json:"device"`
	Before  float64        `json:"cost_before_ms"`
	After   float64        `json:"cost_after_ms"`
	Speedup float64        `json:"speedup"`
	Applied []AppliedRule  `json:"applied"`
	Opaque  map[string]int `json:"opaque"`
	// OpaqueReasons says why the opaque nodes stayed opaque, by operator.
	OpaqueReasons []OpaqueReason   `json:"opaque_reasons"`
	Search        SearchStats      `json:"search"`
	ByOperator    []OperatorChange `json:"cost_by_operator"`
	Unshaped      int              `json:"rules_without_shapes_left_out"`
	MemoryBefore  int64            `json:"memory_before_bytes"`
	MemoryAfter   int64            `json:"memory_after_bytes"`
	Measured      *SideBySide      `json:"measured,omitempty"`
	Confirmed     *ConfirmedGain   `json:"confirmed,omitempty"`
	// ExternalData are the weights files the rewritten model refers to
	// for the weights it keeps as the input stored them.
	ExternalData []ExternalData `json:"external_data"`
	// OpaqueShare counts the opaque nodes against the model's.
	OpaqueShare OpaqueShare `json:"opaque_share"`
	// MeasuredOn are the side-by-side runs on every backend asked for,
	// Measured's first.
	MeasuredOn []*SideBySide `json:"measured_on,omitempty"`
}

// ExternalData is a weights file (ONNX external data) that the rewritten
// model refers to, as the input model did, for weights it writes
// unchanged.
type ExternalData struct {
	// Location is the file's name relative to the model's folder.
	Location     string `json:"location"`
	Initializers int    `json:"initializers"`
	// BesideOutput and BesideInput say whether the file lies beside the
	// rewritten model, where a runtime looks for it, and beside the input.
	BesideOutput bool `json:"beside_output"`
	BesideInput  bool `json:"beside_input"`
}

// CostUnit names the unit of a cost model's prices, for people: the
// analytic model's milliseconds are an estimate, comparable between
// graphs but not with times measured on a machine.
func CostUnit(costModel string) string {
	if costModel == "measured" {
		return "ms"
	}
	return "model ms"
}

// ReportRules names the rule version an optimization used.
type ReportRules struct {
	Version string `json:"version"`
	Hash    string `json:"hash"`
	Count   int    `json:"count"`
}

// SearchStats is how the search went.
type SearchStats struct {
	Explored   int          `json:"explored"`
	Seen       int          `json:"seen"`
	Seconds    float64      `json:"seconds"`
	Stopped    StopReason   `json:"stopped"`
	OverMemory int          `json:"over_memory_limit"`
	Trace      []TracePoint `json:"best_cost_over_time"`
}

// AppliedRule names a rule three ways: its place in the version (the
// same in the store and in a bundle), its content hash, and its id in
// the database when it came from one ('rulebook show ID').
type AppliedRule struct {
	Index int    `json:"index"`
	Hash  string `json:"hash"`
	ID    int64  `json:"id,omitempty"`
	Rule  string `json:"rule"`
	Count int    `json:"count"`
	// LeftToRight and RightToLeft split Count by direction: from the
	// rule's source to its target as Rule reads, or back.
	LeftToRight int `json:"left_to_right"`
	RightToLeft int `json:"right_to_left"`
}

// Direction says which way the rewrite used the rule, for people.
func (a AppliedRule) Direction() string {
	switch {
	case a.RightToLeft == 0:
		return "left to right"
	case a.LeftToRight == 0:
		return "right to left"
	}
	return fmt.Sprintf("%d left to right, %d right to left", a.LeftToRight, a.RightToLeft)
}

// OperatorChange is one operator's part of the cost before and after.
type OperatorChange struct {
	Operator    string  `json:"operator"`
	NodesBefore int     `json:"nodes_before"`
	Before      float64 `json:"before_ms"`
	NodesAfter  int     `json:"nodes_after"`
	After       float64 `json:"after_ms"`
}

// TracePoint is the best cost found by some time in the search.
type TracePoint struct {
	Seconds  float64 `json:"seconds"`
	Explored int     `json:"explored"`
	Best     float64 `json:"best_ms"`
}

// ConfirmedGain is a measured search's gain timed again side by side
// (see Confirmation).
type ConfirmedGain struct {
	Rounds  int     `json:"rounds"`
	Removed float64 `json:"removed_ms"` // the configurations the rewrite removed
	Added   float64 `json:"added_ms"`   // the configurations it added
	Held    bool    `json:"held"`
	Error   string  `json:"error,omitempty"`
}

// NewReport describes the search that turned start into res.Graph with
// the rules of rs, priced by costModel ("analytic" or "measured");
// measured is the side-by-side run of both models, if there was one.
func NewReport(model, costModel string, rs *version.Set, start *Graph, res *Result, measured []*SideBySide) *Report {
	r := &Report{Model: model, CostModel: costModel, CostUnit: CostUnit(costModel), Before: res.Before, After: res.After, Speedup: ratio(res.Before, res.After),
		Applied: appliedRules(rs, res), Opaque: start.Opaque(), OpaqueReasons: start.OpaqueReasons(), OpaqueShare: start.OpaqueShare(),
		MemoryBefore: start.Memory(), MemoryAfter: res.Graph.Memory(), MeasuredOn: measured, ExternalData: []ExternalData{}}
	if len(measured) > 0 {
		r.Measured = measured[0]
	}
	r.Rules = ReportRules{Version: rs.Tag, Hash: rs.Hash, Count: len(rs.Rules)}
	r.Search = SearchStats{Explored: res.Explored, Seen: res.Seen, Seconds: res.Elapsed.Seconds(), Stopped: res.Stopped, OverMemory: res.OverMemory}
	r.Unshaped = res.Unshaped
	r.ByOperator = costByOperator(res.BeforeByOperator, res.AfterByOperator)
	if c := res.Confirmed; c != nil {
		r.Confirmed = &ConfirmedGain{Rounds: c.Rounds, Removed: c.Before, Added: c.After, Held: c.Held, Error: c.Err}
	}
	r.Search.Trace = trace(res.Trace)
	return r
}

// trace is the best cost over time as the report gives it: the start,
// then each point that improves on the one before by more than rounding
// error, and the last point, which may be a confirmation's fresh price.
func trace(points []Progress) []TracePoint {
	out := []TracePoint{}
	for i, p := range points {
		if n := len(out); n > 0 && i < len(points)-1 && p.Best >= out[n-1].Best*(1-tieTolerance) {
			continue
		}
		out = append(out, TracePoint{Seconds: p.Elapsed.Seconds(), Explored: p.Explored, Best: p.Best})
	}
	return out
}

// ratio is before/after, 1 when both are 0 (a model with nothing to cost).
func ratio(before, after float64) float64 {
	if after == 0 {
		return 1
	}
	return before / after
}

// appliedRules lists the rules a search used, the most used first.
func appliedRules(rs *version.Set, res *Result) []AppliedRule {
	out := []AppliedRule{}
	for i, n := range res.Applied {
		a := AppliedRule{Index: i, Hash: rs.RuleHashes[i], Rule: rs.Texts[i], Count: n, LeftToRight: n - res.Reversed[i], RightToLeft: res.Reversed[i]}
		if rs.IDs != nil {
			a.ID = rs.IDs[i]
		}
		out = append(out, a)
	}
	sort.Slice(out, func(a, b int) bool {
		return out[a].Count > out[b].Count || out[a].Count == out[b].Count && out[a].Index < out[b].Index
	})
	return out
}

// costByOperator pairs the two splits, the costliest operator first.
func costByOperator(before, after map[string]OperatorCost) []OperatorChange {
	ops := slices.Sorted(maps.Keys(before))
	for op := range maps.Keys(after) {
		if _, ok := before[op]; !ok {
			ops = append(ops, op)
		}
	}
	slices.Sort(ops)
	out := []OperatorChange{}
	for _, op := range ops {
		b, a := before[op], after[op]
		out = append(out, OperatorChange{Operator: op, NodesBefore: b.Nodes, Before: b.Ms, NodesAfter: a.Nodes, After: a.Ms})
	}
	// Costliest first; ties stay in name order.
	slices.SortStableFunc(out, func(x, y OperatorChange) int {
		return cmp.Compare(max(y.Before, y.After), max(x.Before, x.After))
	})
	return out
}

// WriteFile writes the report as indented JSON, rules as they read ("=>",
// not "=\u003e"), through outfile.Write: whole or not at all, and only onto
// a regular file or a new name.
func (r *Report) WriteFile(path string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(r)
	if err != nil {
		return fmt.Errorf("write the report %s: %w", path, err)
	}
	return outfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	})
}

// WriteText summarises the report for a terminal: the rules and costs,
// the search, the rules applied, the operators whose cost changed, the
// opaque operators, and the confirmation and side-by-side runs if any.
func (r *Report) WriteText(w io.Writer) {
	unit := cmp.Or(r.CostUnit, CostUnit(r.CostModel))
	fmt.Fprintf(w, "rules %s (%.12s, %d rules); %s cost %.3f -> %.3f %s (%.2fx)\n",
		r.Rules.Version, r.Rules.Hash, r.Rules.Count, r.CostModel, r.Before, r.After, unit, r.Speedup)
	if unit != "ms" {
		fmt.Fprintf(w, "  (%s: the analytic model's estimate%s, modelled, not measured: to compare graphs, not with measured times)\n", unit, forDevice(r.Device))
	} else if r.Device != "" {
		fmt.Fprintf(w, "  (ms: operators' times measured on %s)\n", safetext.Name(r.Device))
	}
	fmt.Fprintf(w, "search: %d graphs expanded, %d seen, %.1fs, stopped: %s\n", r.Search.Explored, r.Search.Seen, r.Search.Seconds, r.Search.Stopped)
	for _, a := range r.Applied {
		fmt.Fprintf(w, "  %3d× %s (%s)\n", a.Count, a.Rule, a.Direction())
	}
	writeChanges(w, r.ByOperator, unit)
	if len(r.OpaqueReasons) > 0 {
		writeOpaqueShare(w, r.OpaqueShare)
		fmt.Fprintln(w, "opaque nodes (rules do not cross them), and why:")
	}
	for _, o := range r.OpaqueReasons {
		fmt.Fprintf(w, "  %s ×%d: %s\n", safetext.Name(o.Operator), o.Nodes, o.Reason)
	}
	if r.Unshaped > 0 {
		fmt.Fprintf(w, "%d rules left out: they record no shapes, so the ranks they hold at are unknown\n", r.Unshaped)
	}
	writeConfirmation(w, r.Confirmed, r.Before)
	measured := r.MeasuredOn
	if len(measured) == 0 && r.Measured != nil {
		measured = []*SideBySide{r.Measured}
	}
	for _, m := range measured {
		fmt.Fprintf(w, "measured (%s, %d runs each): original %.3f ms, rewritten %.3f ms, spread %.3f ms: %s; outputs differ by %.2g at most (relative)\n",
			backendName(m.Backend), m.Runs, m.Original, m.Optimized, m.Spread, m.verdict(len(r.Applied) > 0), m.MaxRelDiff)
	}
}

// verdict says what the side-by-side times show: a speed-up only where a
// rewrite applied and the medians differ by more than the spread, since
// anything less is the machine's noise.
func (m *SideBySide) verdict(rewritten bool) string {
	switch {
	case !rewritten:
		return "no rule applied, so both are the same model and no speed-up is claimed"
	case m.Runs < 2:
		return "one run each cannot measure the spread, so no speed-up is claimed"
	case math.Abs(m.Original-m.Optimized) <= m.Spread:
		return "the difference is within the spread, so no speed-up is claimed"
	}
	return fmt.Sprintf("%.2fx", m.Speedup)
}

// writeChanges lists the operators whose cost the rewrite changed.
func writeChanges(w io.Writer, ops []OperatorChange, unit string) {
	header := "cost by operator, where it changed:"
	for _, c := range ops {
		if c.NodesBefore != c.NodesAfter || math.Abs(c.Before-c.After) >= 0.0005 {
			if header != "" {
				fmt.Fprintln(w, header)
				header = ""
			}
			fmt.Fprintf(w, "  %-14s %4d nodes %9.3f %s -> %4d nodes %9.3f %s\n", c.Operator, c.NodesBefore, c.Before, unit, c.NodesAfter, c.After, unit)
		}
	}
}

// writeConfirmation says whether a measured gain held when timed again.
func writeConfirmation(w io.Writer, c *ConfirmedGain, before float64) {
	switch {
	case c == nil:
	case c.Error != "":
		fmt.Fprintf(w, "the rewrite could not be timed again (%s), so the model is written without it\n", c.Error)
	case c.Held:
		fmt.Fprintf(w, "timed again side by side (%d rounds): the operators the rewrite removed take %.3f ms, those it added %.3f ms; it holds, a gain of %.1f%% of the model\n",
			c.Rounds, c.Removed, c.Added, 100*(c.Removed-c.Added)/before)
	default:
		fmt.Fprintf(w, "timed again side by side (%d rounds): the operators the rewrite removed take %.3f ms, those it added %.3f ms; the gain does not hold, so the model is written without rewrites\n",
			c.Rounds, c.Removed, c.Added)
	}
}

// WeightNotes says, for each weights file the rewritten model at output
// refers to but that does not lie beside it, what to do to run it with
// its weights.
func (r *Report) WeightNotes(output string) []string {
	var notes []string
	for _, e := range r.ExternalData {
		switch {
		case e.BesideOutput:
		case e.BesideInput:
			notes = append(notes, fmt.Sprintf("%s refers to %s for %d weights, as the input does, but the file is not beside it: copy or link it there to run the model with them",
				output, e.Location, e.Initializers))
		default:
			notes = append(notes, fmt.Sprintf("%s refers to %s for %d weights, as the input does; that file is absent (random weights were used here): put it beside %s to run the model with its weights",
				output, e.Location, e.Initializers, output))
		}
	}
	return notes
}

// Optimization is the report as the store records it for 'rulebook
// usage', in run runID.
func (r *Report) Optimization(runID int64) store.Optimization {
	o := store.Optimization{RunID: runID, Model: r.Model, VersionTag: r.Rules.Version, VersionHash: r.Rules.Hash, CostModel: r.CostModel,
		Before: r.Before, After: r.After, Explored: r.Search.Explored, Seen: r.Search.Seen, Seconds: r.Search.Seconds, Stopped: r.Search.Stopped.String()}
	for _, a := range r.Applied {
		o.Uses = append(o.Uses, store.RuleUse{Rule: a.Rule, Count: a.Count})
	}
	return o
}

// writeOpaqueShare says how many of the model's nodes rules cannot see,
// and how many of those no rule family could.
func writeOpaqueShare(w io.Writer, s OpaqueShare) {
	fmt.Fprintf(w, "opaque: %d of %d nodes; %d (%.1f%%) are forms of registry operators the mapping refuses", s.Opaque, s.Nodes, s.Refused, 100*s.RefusedShare)
	if s.Uncovered > 0 {
		fmt.Fprintf(w, ", %d are operators no rule family covers (%s)", s.Uncovered, strings.Join(s.UncoveredOperators, ", "))
	}
	fmt.Fprintln(w)
}

// backendName names a side-by-side run's backend for people.
func backendName(b string) string {
	switch b {
	case "", runtime.BackendCPU:
		return "CPU runtime"
	case runtime.BackendORT:
		return "ONNX Runtime"
	}
	return b + " backend"
}

// forDevice names the device an analytic model models, for the text.
func forDevice(device string) string {
	if device == "" {
		return ""
	}
	return " for " + safetext.Name(device)
}
