package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTick = 100

// cpuTime is the CPU the process has used so far (user + system).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

// parseStat reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat
// line. The command name (field 2) may hold spaces and parentheses, so
// fields are counted from the last ')'.
func parseStat(b []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return 0, fmt.Errorf("unreadable stat line %q", b)
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3 (state): utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the name", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unreadable utime %q or stime %q", f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// memory is what /proc/<pid>/status says of the process's resident set.
type memory struct {
	rss, hwm int64 // bytes: VmRSS now, VmHWM (peak)
}

func memoryOf(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	return parseStatus(b)
}

func parseStatus(b []byte) (memory, error) {
	var m memory
	var seen int
	for line := range strings.SplitSeq(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("unreadable %s line %q", key, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("unreadable %s line %q", key, line)
		}
		if key == "VmRSS" {
			m.rss = kb << 10
		} else {
			m.hwm = kb << 10
		}
		seen++
	}
	if seen != 2 {
		return m, fmt.Errorf("VmRSS or VmHWM missing from status")
	}
	return m, nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
