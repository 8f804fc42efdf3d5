//go:build !linux

package netdial

import (
	"errors"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; the
// keepalive probes still apply.
func setUserTimeout(uintptr, time.Duration) error { return nil }

func userTimeout(uintptr) (time.Duration, error) { return 0, nil }

var errNotLinux = errors.New("only on Linux")

// setRecvLowWater and queued are Linux's: elsewhere a reader wakes per
// segment, as without them.
func setRecvLowWater(uintptr, int) error { return errNotLinux }

func queued(uintptr) (int, error) { return 0, errNotLinux }
