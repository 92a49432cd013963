package store

import (
	"cmp"
	"slices"
	"strings"
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
