package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile writes a CPU profile of the whole run to the file named by
// FERRY_CPUPROFILE, when set; the returned function ends it. It is for
// finding where ferry's time goes (go tool pprof bin/ferry FILE), so it is
// an environment variable rather than a flag every command would show.
func startProfile() func() {
	path := os.Getenv("FERRY_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ferry: FERRY_CPUPROFILE:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "ferry: FERRY_CPUPROFILE:", err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
