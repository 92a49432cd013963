// Package simulate runs a task graph the way FlexFlow's execution simulator
// does (TASO/FlexFlow thesis, §3.4). Every device and link is a resource
// that runs its tasks one at a time, in the order given. A task starts once
// the tasks it depends on have finished and its resource is free. Nothing
// runs: durations come from the caller's cost model. The result is a
// schedule, with each device's time split into computation, communication
// it waits on, and idleness. docs/planner.md ("Cost model") tells more.
package simulate

import (
	"context"
	"fmt"
	"slices"
)

// ResourceKind says whether a resource computes or communicates.
type ResourceKind int

// Resource kinds.
const (
	Device ResourceKind = iota
	Link
)

// Resource is a device or a link. Device is the device a link belongs to
// (its end that the simulation follows).
type Resource struct {
	Name   string
	Kind   ResourceKind
	Device int
}

// Category classifies a task for the breakdown and the trace.
type Category int

// Task categories.
const (
	Compute Category = iota
	Communication
)

func (c Category) String() string {
	if c == Compute {
		return "compute"
	}
	return "communication"
}

// Task is one piece of simulated work: Duration seconds on Resource (an
// index into the resources), after every task in Deps (indices into the
// tasks).
type Task struct {
	Name     string
	Category Category
	Resource int
	Duration float64
	Deps     []int
}

// Schedule is the simulated run of a task graph.
type Schedule struct {
	Resources  []Resource
	Tasks      []Task
	Start, End []float64
	Makespan   float64
}

// Run simulates the tasks. It fails on a dependency or resource out of
// range, a negative or NaN duration, or a cycle (including one made by a
// resource's order: a task that waits on one queued after it on the same
// resource).
func Run(ctx context.Context, resources []Resource, tasks []Task) (*Schedule, error) {
	if err := validate(resources, tasks); err != nil {
		return nil, err
	}
	s := &Schedule{Resources: resources, Tasks: tasks, Start: make([]float64, len(tasks)), End: make([]float64, len(tasks))}
	// Kahn's algorithm over dependency edges plus an edge from each task
	// to the next on its resource.
	waiting := make([]int, len(tasks))
	users := make([][]int, len(tasks))
	next := make([]int, len(tasks))
	last := make([]int, len(resources))
	for i := range last {
		last[i] = -1
	}
	for i, t := range tasks {
		next[i] = -1
		if p := last[t.Resource]; p >= 0 {
			next[p] = i
			waiting[i]++
		}
		last[t.Resource] = i
		for _, d := range t.Deps {
			users[d] = append(users[d], i)
			waiting[i]++
		}
	}
	ready := make([]int, 0, len(tasks))
	for i := range tasks {
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	free := make([]float64, len(resources))
	done := 0
	for len(ready) > 0 {
		if done%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		t := tasks[i]
		start := free[t.Resource]
		for _, d := range t.Deps {
			start = max(start, s.End[d])
		}
		s.Start[i], s.End[i] = start, start+t.Duration
		free[t.Resource] = s.End[i]
		s.Makespan = max(s.Makespan, s.End[i])
		done++
		release := users[i]
		if next[i] >= 0 {
			release = append(release, next[i])
		}
		for _, u := range release {
			if waiting[u]--; waiting[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
	if done < len(tasks) {
		return nil, fmt.Errorf("the tasks wait on each other in a cycle (%d of %d could run); first stuck: %s", done, len(tasks), firstStuck(tasks, waiting))
	}
	return s, nil
}

func firstStuck(tasks []Task, waiting []int) string {
	for i, w := range waiting {
		if w > 0 {
			return tasks[i].Name
		}
	}
	return "?"
}

func validate(resources []Resource, tasks []Task) error {
	for i, t := range tasks {
		if t.Resource < 0 || t.Resource >= len(resources) {
			return fmt.Errorf("task %d (%s): resource %d out of range (%d resources)", i, t.Name, t.Resource, len(resources))
		}
		if !(t.Duration >= 0) {
			return fmt.Errorf("task %d (%s): duration %v; want a number ≥ 0", i, t.Name, t.Duration)
		}
		for _, d := range t.Deps {
			if d < 0 || d >= len(tasks) || d == i {
				return fmt.Errorf("task %d (%s): dependency %d out of range or on itself", i, t.Name, d)
			}
		}
	}
	return nil
}

// Breakdown is how one device's makespan splits: Compute is time its
// device resource runs tasks; ExposedCommunication is time it computes
// nothing while a communication task runs on one of its links; Idle is
// the rest. The three add up to the makespan.
type Breakdown struct {
	Compute, ExposedCommunication, Idle float64
}

// Breakdowns is Breakdown for each of the resources rs, in one pass over
// the tasks (a planner asks for every pipeline stage of a step of
// millions of tasks).
func (s *Schedule) Breakdowns(rs []int) []Breakdown {
	at := map[int]int{}         // resource -> its index in rs
	byDevice := map[int][]int{} // device -> the indices in rs computing on it
	for k, r := range rs {
		at[r] = k
		byDevice[s.Resources[r].Device] = append(byDevice[s.Resources[r].Device], k)
	}
	busy, comm := make([][]span, len(rs)), make([][]span, len(rs))
	for i, t := range s.Tasks {
		sp := span{s.Start[i], s.End[i]}
		if k, ok := at[t.Resource]; ok {
			busy[k] = append(busy[k], sp)
			continue
		}
		if res := s.Resources[t.Resource]; res.Kind == Link {
			for _, k := range byDevice[res.Device] {
				comm[k] = append(comm[k], sp)
			}
		}
	}
	out := make([]Breakdown, len(rs))
	for k := range rs {
		compute := length(merge(busy[k]))
		exposed := length(merge(append(busy[k], comm[k]...))) - compute
		out[k] = Breakdown{Compute: compute, ExposedCommunication: exposed, Idle: max(0, s.Makespan-compute-exposed)}
	}
	return out
}

// Breakdown splits the makespan for the device whose compute resource is
// resource r, counting communication on every link with the same Device.
func (s *Schedule) Breakdown(r int) Breakdown {
	dev := s.Resources[r].Device
	var busy, comm []span
	for i, t := range s.Tasks {
		res := s.Resources[t.Resource]
		switch {
		case t.Resource == r:
			busy = append(busy, span{s.Start[i], s.End[i]})
		case res.Kind == Link && res.Device == dev:
			comm = append(comm, span{s.Start[i], s.End[i]})
		}
	}
	compute := length(merge(busy))
	exposed := length(merge(append(busy, comm...))) - compute
	return Breakdown{Compute: compute, ExposedCommunication: exposed, Idle: max(0, s.Makespan-compute-exposed)}
}

type span struct{ from, to float64 }

func merge(ss []span) []span {
	slices.SortFunc(ss, func(a, b span) int {
		switch {
		case a.from < b.from:
			return -1
		case a.from > b.from:
			return 1
		}
		return 0
	})
	var out []span
	for _, x := range ss {
		if x.to <= x.from {
			continue
		}
		if n := len(out); n > 0 && x.from <= out[n-1].to {
			out[n-1].to = max(out[n-1].to, x.to)
			continue
		}
		out = append(out, x)
	}
	return out
}

func length(ss []span) float64 {
	var t float64
	for _, x := range ss {
		t += x.to - x.from
	}
	return t
}
