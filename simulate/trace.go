package simulate

import (
	"encoding/json"
	"io"
)

// traceEvent is one event of the Trace Event Format that Chrome's
// about:tracing and Perfetto read: "X" complete events with a start and a
// duration in microseconds, and "M" metadata events naming processes and
// threads.
type traceEvent struct {
	Name     string         `json:"name"`
	Category string         `json:"cat,omitempty"`
	Phase    string         `json:"ph"`
	Time     float64        `json:"ts"`
	Duration *float64       `json:"dur,omitempty"`
	Process  int            `json:"pid"`
	Thread   int            `json:"tid"`
	Args     map[string]any `json:"args,omitempty"`
}

type traceFile struct {
	Events          []traceEvent      `json:"traceEvents"`
	DisplayTimeUnit string            `json:"displayTimeUnit"`
	Metadata        map[string]string `json:"metadata"`
}

// WriteChromeTrace writes the schedule as a Chrome trace: one process for
// the devices and one for the links, one thread per resource, one slice
// per task. title names the run; the trace says it is simulated.
func WriteChromeTrace(w io.Writer, s *Schedule, title string) error {
	const devices, links = 1, 2
	f := traceFile{DisplayTimeUnit: "ms", Metadata: map[string]string{
		"title": title, "note": "simulated: no step was run; times come from rulebook's task-graph simulator"}}
	meta := func(name string, pid, tid int, value string) {
		f.Events = append(f.Events, traceEvent{Name: name, Phase: "M", Process: pid, Thread: tid, Args: map[string]any{"name": value}})
	}
	meta("process_name", devices, 0, "devices (simulated)")
	meta("process_name", links, 0, "links (simulated)")
	pid := func(r Resource) int {
		if r.Kind == Device {
			return devices
		}
		return links
	}
	for i, r := range s.Resources {
		meta("thread_name", pid(r), i, r.Name)
	}
	for i, t := range s.Tasks {
		d := (s.End[i] - s.Start[i]) * 1e6
		f.Events = append(f.Events, traceEvent{Name: t.Name, Category: t.Category.String(), Phase: "X",
			Time: s.Start[i] * 1e6, Duration: &d, Process: pid(s.Resources[t.Resource]), Thread: t.Resource,
			Args: map[string]any{"simulated_ms": t.Duration * 1e3}})
	}
	e := json.NewEncoder(w)
	return e.Encode(f)
}
