package store

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
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

// UsageFormats are the forms usage is written in.
var UsageFormats = []string{"text", "csv", "json"}

// WriteUsage writes uses as a text heat map, CSV or JSON.
func WriteUsage(w io.Writer, uses []Usage, format string) error {
	switch format {
	case "text":
		return NewHeatMap(uses).WriteText(w)
	case "csv":
		return WriteUsageCSV(w, uses)
	case "json":
		return WriteUsageJSON(w, uses)
	}
	return fmt.Errorf("unknown usage format %q (known: %s)", format, strings.Join(UsageFormats, ", "))
}
