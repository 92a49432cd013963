package optimizer

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"rulebook/runtime"
	"rulebook/store"
)

// WriteCostTotals prints the total time of each operator over the whole model
// (each node at its configuration's measured cost), largest first.
func WriteCostTotals(w io.Writer, nodes []runtime.NodeInfo, costs []store.OpCost) error {
	byKey := map[string]time.Duration{}
	for _, c := range costs {
		byKey[c.Operator+"|"+c.Shapes+"|"+c.Params] = c.Median
	}
	totals, all := runtime.TotalsByOperator(nodes, func(n runtime.NodeInfo) time.Duration { return byKey[n.ConfigKey()] })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operator\tnodes\tsum of medians\tshare\t")
	for _, t := range totals {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f%%\t\n", t.Op, t.Nodes, t.Sum.Round(time.Microsecond), 100*float64(t.Sum)/float64(max(all, 1)))
	}
	fmt.Fprintf(tw, "total\t%d\t%s\t\t\n", len(nodes), all.Round(time.Microsecond))
	return tw.Flush()
}
