//go:build unix

package store

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of a process's start time in
// /proc/PID/stat; it is 100 on every architecture Linux supports.
const clockTicks = 100

// reuseSlack is how much later than its run a process may seem to have
// started and still count as the run's own.
const reuseSlack = 10 * time.Second

// processGone says whether the process pid of this host, which began a run
// at started, has ended: no process has that pid, the one that has it is a
// zombie (killed, not yet reaped), or it started after the run did, so the
// pid was reused. When it cannot tell, the process counts as alive.
func processGone(pid int, started time.Time) bool {
	err := syscall.Kill(pid, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return true
	case err != nil && !errors.Is(err, syscall.EPERM):
		return false
	}
	fields, ok := procStat(pid)
	switch {
	case !ok:
		return false
	case fields[0] == "Z" || fields[0] == "X":
		return true
	}
	// The run row is written after its process starts, so a process that
	// started later is another one. The start is reckoned from the boot
	// time, which moves when the clock is set: reuseSlack keeps a clock
	// step from making a live process look like another.
	begun, ok := processStart(fields)
	return ok && begun.After(started.Add(reuseSlack))
}

// procStat reads the fields of /proc/PID/stat after the command name,
// the process's state first; ok is false where /proc does not say (not
// Linux).
func procStat(pid int) (fields []string, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	// "pid (comm) state ppid …": comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil, false
	}
	fields = strings.Fields(string(data[i+1:]))
	return fields, len(fields) >= 20
}

// processStart is when a process started: its start time in clock ticks
// after boot (field 22 of /proc/PID/stat) added to the boot time.
func processStart(fields []string) (time.Time, bool) {
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	boot, ok := bootTime()
	if err != nil || !ok {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), true
}

// bootTime reads when the machine started from /proc/stat's btime line.
func bootTime() (time.Time, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, found := strings.CutPrefix(line, "btime "); found {
			sec, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			return time.Unix(sec, 0), err == nil
		}
	}
	return time.Time{}, false
}
