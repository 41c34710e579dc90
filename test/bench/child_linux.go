package main

import "syscall"

// childAttrs makes the kernel kill a bridge whose bench died, so a bench
// killed mid-run leaves no bridge behind.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
