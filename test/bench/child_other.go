//go:build !linux

package main

import "syscall"

// childAttrs has no parent-death signal outside Linux; the bench reads
// /proc and measures on Linux only, but still builds elsewhere.
func childAttrs() *syscall.SysProcAttr { return nil }
