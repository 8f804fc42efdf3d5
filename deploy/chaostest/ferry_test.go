package chaostest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ferry-cdc/ferry/internal/testkit"
)

// ferryProc is one `ferry run` subprocess, whose resident memory is
// sampled from /proc while it runs.
type ferryProc struct {
	cmd    *exec.Cmd
	out    *testkit.Buffer
	exited chan struct{}
	err    error // Wait's result, once exited is closed

	mu       sync.Mutex
	peak     int64 // highest VmHWM seen, bytes
	window   int64 // highest VmRSS since resetWindow, bytes
	sampling bool
}

// startFerry runs the ferry binary with args; its output goes to out.
func startFerry(bin string, out *testkit.Buffer, args ...string) (*ferryProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	// A test binary killed by its timeout must not leave ferry running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &ferryProc{cmd: cmd, out: out, exited: make(chan struct{}), sampling: true}
	go func() {
		f.err = cmd.Wait()
		close(f.exited)
	}()
	go f.sample()
	return f, nil
}

func (f *ferryProc) sample() {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-f.exited:
			return
		case <-tick.C:
		}
		hwm, rss, err := procMemory(f.cmd.Process.Pid)
		if err != nil {
			continue
		}
		f.mu.Lock()
		f.peak = max(f.peak, hwm, rss)
		f.window = max(f.window, rss)
		f.mu.Unlock()
	}
}

// procMemory reads a process's peak and current resident set size.
func procMemory(pid int) (hwm, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmHWM:":
			hwm = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return hwm, rss, nil
}

// peakRSS is the highest resident set size seen over the process's life.
func (f *ferryProc) peakRSS() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peak
}

// resetWindow starts a new window for windowRSS.
func (f *ferryProc) resetWindow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.window = 0
}

// windowRSS is the highest resident set size sampled since resetWindow.
func (f *ferryProc) windowRSS() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.window
}

// running reports whether the process is still alive.
func (f *ferryProc) running() bool {
	select {
	case <-f.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to go.
func (f *ferryProc) kill() {
	_ = f.cmd.Process.Signal(syscall.SIGKILL)
	<-f.exited
}

// stop sends SIGTERM and waits for the exit; ferry then flushes, confirms
// and exits 0.
func (f *ferryProc) stop(timeout time.Duration) error {
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	return f.wait(timeout)
}

// wait waits for the exit, killing the process after timeout.
func (f *ferryProc) wait(timeout time.Duration) error {
	select {
	case <-f.exited:
		return f.err
	case <-time.After(timeout):
		f.kill()
		return fmt.Errorf("ferry did not exit within %s", timeout)
	}
}

// runFerry runs a ferry command to its end, within timeout.
func runFerry(bin string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("ferry %s: no exit within %s", args[0], timeout)
	}
	return string(out), err
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
