// Package plan turns a training graph and a machine into parallel training
// plans, and prices each in the task-graph simulator. The strategies are
// data parallel, Megatron-style tensor parallel, the best data × tensor
// grid, and pipeline stages on a 1F1B schedule. Every time a plan carries is
// simulated, and everything that prints it says so. docs/planner.md tells
// the long story: machine, cost model, strategies and outputs.
package plan
