package netdial

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

func setUserTimeout(fd uintptr, d time.Duration) error {
	if err := unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds())); err != nil {
		return fmt.Errorf("set TCP_USER_TIMEOUT: %w", err)
	}
	return nil
}

func userTimeout(fd uintptr) (time.Duration, error) {
	ms, err := unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	return time.Duration(ms) * time.Millisecond, err
}

func setRecvLowWater(fd uintptr, bytes int) error {
	return unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, bytes)
}

func queued(fd uintptr) (int, error) {
	return unix.IoctlGetInt(int(fd), unix.SIOCINQ)
}
