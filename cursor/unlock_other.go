//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package cursor

import "os"

// unlock is a no-op where bbolt's lock is released with the file handle.
func unlock(*os.File) {}
