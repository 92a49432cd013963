package store

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
)

// WriteUsageCSV writes rule,model,count rows. It leaves write errors to cw.Error: csv.Writer buffers, and
// keeps the first error for Flush to report.
func WriteUsageCSV(w io.Writer, uses []Usage) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"rule", "model", "count"})
	for _, u := range uses {
		cw.Write([]string{u.Rule, u.Model, strconv.Itoa(u.Count)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteUsageJSON writes an array of {"rule","model","count"} objects.
func WriteUsageJSON(w io.Writer, uses []Usage) error {
	if uses == nil {
		uses = []Usage{} // [] rather than null
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // rules read "=>", not "=\u003e"
	enc.SetIndent("", "  ")
	return enc.Encode(uses)
}
