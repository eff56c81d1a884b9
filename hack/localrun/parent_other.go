//go:build !linux

package main

import "syscall"

// exitWithParent is Linux-only; elsewhere Ctrl-C and SIGTERM still stop
// everything this process started.
func exitWithParent(syscall.Signal) error { return nil }
