//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockHeld reports whether a build holds start-agent.sh's lock. It asks
// for a shared lock without waiting and lets it go at once: a shared
// probe never stands in the way of another probe, and a build (which
// takes the lock exclusively) waits for it at most microseconds.
func lockHeld(bin string) bool {
	if f, err := os.Open(filepath.Join(bin, ".build.lock")); err == nil {
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
			return errors.Is(err, syscall.EWOULDBLOCK)
		}
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	// Without flock(1) start-agent.sh locks by mkdir, the holder's pid inside.
	raw, err := os.ReadFile(filepath.Join(bin, ".build.lockdir", "pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
