// Package plan turns a training graph and a machine into parallel training
// plans and prices each in the task-graph simulator: data parallel,
// Megatron-style tensor parallel, the best data × tensor grid, and pipeline
// stages on a 1F1B schedule.
//
// Every time a plan carries is simulated: per-operator costs come from a
// roofline over the machine's device (the larger of FLOPs over peak and
// bytes over memory bandwidth), collectives from the cluster package's α–β
// formulas, and the simulate package overlaps them the way FlexFlow's
// simulator does. A Plan names its cost model, and everything that prints
// it says "simulated".
//
// Devices of one data- or tensor-parallel group run the same tasks (the
// strategies are SPMD within a pipeline stage), so the simulation runs one
// representative device per stage, with its own links; collectives are
// priced for the whole group.
//
// docs/planner.md tells the long story: machine, cost model, strategies
// and outputs.
package plan
