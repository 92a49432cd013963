package simulate

import (
	"encoding/json"
	"fmt"
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

// CheckTrace validates a Chrome trace against the Trace Event Format's
// rules for the events WriteChromeTrace uses: a JSON object with
// traceEvents, each event with name, ph, pid, tid and ts; "X" events with
// a non-negative ts and dur; "M" events naming a process or thread; and a
// name for every thread that has slices.
func CheckTrace(data []byte) error {
	var f struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("not a trace-event object: %w", err)
	}
	if len(f.TraceEvents) == 0 {
		return fmt.Errorf("no traceEvents")
	}
	named, used := map[[2]float64]bool{}, map[[2]float64]bool{}
	for i, e := range f.TraceEvents {
		for _, k := range []string{"name", "ph", "pid", "tid", "ts"} {
			if _, ok := e[k]; !ok {
				return fmt.Errorf("event %d lacks %q", i, k)
			}
		}
		pid, ok1 := e["pid"].(float64)
		tid, ok2 := e["tid"].(float64)
		ts, ok3 := e["ts"].(float64)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("event %d: pid, tid and ts must be numbers", i)
		}
		key := [2]float64{pid, tid}
		switch e["ph"] {
		case "X":
			if d, ok := e["dur"].(float64); !ok || d < 0 || ts < 0 {
				return fmt.Errorf("event %d: complete event with ts %v and dur %v", i, e["ts"], e["dur"])
			}
			used[key] = true
		case "M":
			switch e["name"] {
			case "thread_name":
				named[key] = true
			case "process_name":
			default:
				return fmt.Errorf("event %d: metadata %v", i, e["name"])
			}
		default:
			return fmt.Errorf("event %d: phase %v", i, e["ph"])
		}
	}
	for k := range used {
		if !named[k] {
			return fmt.Errorf("thread %v of process %v has slices but no name", k[1], k[0])
		}
	}
	return nil
}
