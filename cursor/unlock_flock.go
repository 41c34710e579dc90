//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package cursor

import (
	"os"
	"syscall"
)

// unlock releases bbolt's flock on f. Closing f is not enough after a
// panic inside bbolt: the mapping it left behind still references the file,
// and the lock lives until the last reference goes.
func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
