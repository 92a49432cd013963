package store

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// HeatMap is rule usage as a rules × models matrix (TASO's Fig. 2.10).
type HeatMap struct {
	Models []string  // base names, sorted
	Rows   []HeatRow // the most applied rule first, then by text
	Max    int       // the largest cell
}

// HeatRow is how often one rule was applied in each model.
type HeatRow struct {
	Rule   string
	Counts []int // by the index of HeatMap.Models
	Total  int
}

// NewHeatMap arranges usage (see Store.Usage) as a heat map.
func NewHeatMap(uses []Usage) HeatMap {
	var h HeatMap
	for _, u := range uses {
		if !slices.Contains(h.Models, u.Model) {
			h.Models = append(h.Models, u.Model)
		}
	}
	slices.Sort(h.Models)
	byRule := map[string]*HeatRow{}
	for _, u := range uses {
		r := byRule[u.Rule]
		if r == nil {
			r = &HeatRow{Rule: u.Rule, Counts: make([]int, len(h.Models))}
			byRule[u.Rule] = r
		}
		c := &r.Counts[slices.Index(h.Models, u.Model)]
		*c += u.Count
		r.Total += u.Count
		h.Max = max(h.Max, *c)
	}
	for _, r := range byRule {
		h.Rows = append(h.Rows, *r)
	}
	slices.SortFunc(h.Rows, func(a, b HeatRow) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), strings.Compare(a.Rule, b.Rule))
	})
	return h
}

// ruleWidth is the most a rule's text may take, so that a heat map of a few
// models fits a terminal.
const ruleWidth = 60

// shades darken with the count; index 0 is for an empty cell.
const shades = " ░▒▓█"

// WriteText draws the heat map as text: one row per rule, most applied
// first, one column per model (its file name without .onnx) and a total.
// Each cell holds the count and a shade, ░ ▒ ▓ █, by quarters of the
// largest count; a blank cell means the rule was not applied. Long rules
// are cut with "…".
func (h HeatMap) WriteText(w io.Writer) error {
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
