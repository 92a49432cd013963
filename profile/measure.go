package profile

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"rulebook/internal/outfile"
)

// script is profile_ops.py, carried in the binary so that `rulebook
// profile` does not depend on where the source tree is.
//
//go:embed profile_ops.py
var script []byte

// ScriptName is the measuring script's name, as errors and the profile's
// comments give it.
const ScriptName = "profile_ops.py"

// Sizes names a set of shapes the script measures.
type Sizes string

const (
	// Small is tiny shapes, for CI on a CPU: seconds.
	Small Sizes = "small"
	// Full is the shared H200 profile's shapes on a GPU, and a set scaled
	// to run in minutes on a CPU.
	Full Sizes = "full"
)

// ParseSizes reads a size set's name.
func ParseSizes(s string) (Sizes, error) {
	switch Sizes(s) {
	case Small, Full:
		return Sizes(s), nil
	}
	return "", fmt.Errorf("unknown size set %q (known: small, full)", s)
}

// ParseClock reads --clock: wall, or cpu (the process's CPU time).
func ParseClock(s string) (cpu bool, err error) {
	if s != "wall" && s != "cpu" {
		return false, fmt.Errorf("unknown clock %q (known: wall, cpu)", s)
	}
	return s == "cpu", nil
}

// MeasureOptions says how to run the measurement.
type MeasureOptions struct {
	Python  string // the interpreter; "python3" when empty
	Sizes   Sizes  // Full when empty
	Threads int    // CPU threads for torch; 0 leaves torch's own choice
	// Device is "cpu" or "cuda"; empty picks a CUDA GPU if torch sees
	// one, else the CPU.
	Device string
	// CPUClock times with the process's CPU time instead of the wall
	// clock (on a CPU only): a machine shared with other work then does
	// not inflate the times.
	CPUClock bool
	// Progress, when set, is told of each operator as its timing starts:
	// done of total, and what it is ("linear 512x1024->1024 fp32").
	Progress func(done, total int, what string)
	// Started, when set, is called as the interpreter starts, after the
	// inputs and the output path are checked.
	Started func()
}

// Measurement is a measured profile and the text the script wrote, which
// is kept whole (its comments say when and how it was measured).
type Measurement struct {
	Profile *Profile
	Text    []byte
}

// MissingError says the interpreter, or torch in it, is not there.
type MissingError struct {
	Python string
	What   string // "python" or "torch"
	Detail string
}

func (e *MissingError) Error() string {
	if e.What == "torch" {
		return fmt.Sprintf("%s cannot import torch (pip install torch, or name another interpreter with --python): %s", e.Python, e.Detail)
	}
	return fmt.Sprintf("no Python interpreter %q (install python3 with torch, or name one with --python): %s", e.Python, e.Detail)
}

// ScriptError is the measuring script failing, with the last line it
// wrote to standard error.
type ScriptError struct {
	Status int
	Last   string
}

func (e *ScriptError) Error() string {
	return fmt.Sprintf("%s failed (exit status %d): %s", ScriptName, e.Status, e.Last)
}

// noTorchStatus is the script's exit status when torch cannot be imported.
const noTorchStatus = 3

// Measure runs the measuring script with PyTorch and checks what it wrote
// with Parse: a profile comes back only if every line is valid.
func Measure(ctx context.Context, opt MeasureOptions) (*Measurement, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	python := opt.Python
	if python == "" {
		python = "python3"
	}
	if _, err := exec.LookPath(python); err != nil {
		return nil, &MissingError{Python: python, What: "python", Detail: unwrapExec(err).Error()}
	}
	path, err := writeScript()
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	args := append([]string{"-u", path}, opt.scriptArgs()...)
	if opt.Started != nil {
		opt.Started()
	}
	out, err := runScript(ctx, python, args, opt.Progress)
	if err != nil {
		return nil, err
	}
	p, err := Parse(ScriptName+" output", out)
	if err != nil {
		return nil, fmt.Errorf("the measurement is not a valid profile: %w", err)
	}
	return &Measurement{Profile: p, Text: out}, nil
}

// check refuses options the script would refuse, before it starts.
func (opt MeasureOptions) check() error {
	switch {
	case opt.Device != "" && opt.Device != "cpu" && opt.Device != "cuda":
		return fmt.Errorf("unknown device %q (known: cpu, cuda)", opt.Device)
	case opt.CPUClock && opt.Device != "cpu":
		return fmt.Errorf("the CPU clock (--clock cpu) times the CPU only: name the device (--device cpu)")
	case opt.Threads < 0:
		return fmt.Errorf("threads %d: want 0 (torch's choice) or more", opt.Threads)
	}
	return nil
}

// scriptArgs are the script's flags for the options.
func (opt MeasureOptions) scriptArgs() []string {
	sizes := opt.Sizes
	if sizes == "" {
		sizes = Full
	}
	args := []string{"--sizes", string(sizes)}
	if opt.Device != "" {
		args = append(args, "--device", opt.Device)
	}
	if opt.CPUClock {
		args = append(args, "--clock", "cpu")
	}
	if opt.Threads > 0 {
		args = append(args, "--threads", strconv.Itoa(opt.Threads))
	}
	return args
}

// writeScript puts the embedded script in a temporary file for the
// interpreter to run.
func writeScript() (string, error) {
	f, err := os.CreateTemp("", "rulebook-profile-*.py")
	if err != nil {
		return "", fmt.Errorf("cannot write the measuring script: %w", err)
	}
	if _, err := f.Write(script); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("cannot write the measuring script: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("cannot write the measuring script: %w", err)
	}
	return f.Name(), nil
}

// runScript runs the interpreter, passing its progress lines on as they
// come, and returns what it wrote to standard output.
func runScript(ctx context.Context, python string, args []string, progress func(int, int, string)) ([]byte, error) {
	cmd := exec.CommandContext(ctx, python, args...)
	// A killed script gets a moment to let go of its pipes.
	cmd.WaitDelay = 5 * time.Second
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("cannot run %s: %w", python, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, &MissingError{Python: python, What: "python", Detail: unwrapExec(err).Error()}
	}
	last := readProgress(stderr, progress)
	err = cmd.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("measuring: %w", ctx.Err())
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == noTorchStatus:
		return nil, &MissingError{Python: python, What: "torch", Detail: last}
	case errors.As(err, &exit):
		return nil, &ScriptError{Status: exit.ExitCode(), Last: last}
	case err != nil:
		return nil, fmt.Errorf("running %s: %w", ScriptName, err)
	}
	return stdout.Bytes(), nil
}

// readProgress reads the script's standard error to its end: progress
// lines go to progress, and the last other line is kept for an error.
func readProgress(r io.Reader, progress func(int, int, string)) string {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	last := "(it wrote nothing to standard error)"
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if done, total, what, ok := parseProgress(line); ok {
			if progress != nil {
				progress(done, total, what)
			}
			continue
		}
		if line != "" {
			last = line
		}
	}
	return last
}

// parseProgress reads "progress I/N WHAT".
func parseProgress(line string) (done, total int, what string, ok bool) {
	rest, ok := strings.CutPrefix(line, "progress ")
	if !ok {
		return 0, 0, "", false
	}
	count, what, _ := strings.Cut(rest, " ")
	d, n, ok := strings.Cut(count, "/")
	if !ok {
		return 0, 0, "", false
	}
	done, err1 := strconv.Atoi(d)
	total, err2 := strconv.Atoi(n)
	if err1 != nil || err2 != nil {
		return 0, 0, "", false
	}
	return done, total, what, true
}

// unwrapExec drops exec's own wrapping, whose text repeats the name.
func unwrapExec(err error) error {
	var e *exec.Error
	if errors.As(err, &e) {
		return e.Err
	}
	return err
}

// MeasureFile measures a profile and writes the script's text to path,
// whole, once Parse has accepted every line of it. The path is checked
// before the measurement starts, so a bad one fails at once.
func MeasureFile(ctx context.Context, path string, opt MeasureOptions) (*Measurement, error) {
	if err := outfile.Check(path); err != nil {
		return nil, err
	}
	m, err := Measure(ctx, opt)
	if err != nil {
		return nil, err
	}
	err = outfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(m.Text)
		return err
	})
	if err != nil {
		return nil, err
	}
	m.Profile.Name = path
	return m, nil
}
