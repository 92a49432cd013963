package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"rulebook/store"
)

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
	return writeHeatMap(out, store.NewHeatMap(uses))
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

// ruleWidth is the most a rule's text may take, so that a heat map of a few
// models fits a terminal.
const ruleWidth = 60

// shades darken with the count; index 0 is for an empty cell.
const shades = " ░▒▓█"

func writeHeatMap(w io.Writer, h store.HeatMap) error {
	rw := utf8.RuneCountInString("RULE")
	for _, r := range h.Rows {
		rw = max(rw, min(ruleWidth, utf8.RuneCountInString(r.Rule)))
	}
	cw := len(strconv.Itoa(h.Max)) + 1 // count and shade
	widths := make([]int, len(h.Models))
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", rw, "RULE")
	for i, m := range h.Models {
		name := strings.TrimSuffix(m, ".onnx")
		widths[i] = max(cw, utf8.RuneCountInString(name))
		fmt.Fprintf(&b, "  %*s", widths[i], name)
	}
	tw := max(len("TOTAL"), len(strconv.Itoa(h.Rows[0].Total)))
	fmt.Fprintf(&b, "  %*s\n", tw, "TOTAL")
	for _, r := range h.Rows {
		fmt.Fprintf(&b, "%-*s", rw, truncate(r.Rule, rw))
		for i, n := range r.Counts {
			fmt.Fprintf(&b, "  %*s", widths[i], cell(n, h.Max))
		}
		fmt.Fprintf(&b, "  %*d\n", tw, r.Total)
	}
	fmt.Fprintf(&b, "%d rules applied in %d models; shades ░ ▒ ▓ █ by quarters of the largest count, %d\n", len(h.Rows), len(h.Models), h.Max)
	_, err := io.WriteString(w, b.String())
	return err
}

// cell renders a count with its shade by quarters of the largest count,
// blank when the rule was not applied.
func cell(n, largest int) string {
	if n == 0 {
		return ""
	}
	level := (4*n + largest - 1) / largest // 1..4: quarters, rounded up
	return strconv.Itoa(n) + string([]rune(shades)[level])
}

// truncate cuts s to width runes, marking the cut with "…".
func truncate(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}
