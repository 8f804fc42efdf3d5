//go:build !linux

package netdial

import "time"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist; the
// keepalive probes still apply.
func setUserTimeout(uintptr, time.Duration) error { return nil }

func userTimeout(uintptr) (time.Duration, error) { return 0, nil }
