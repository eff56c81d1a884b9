package grading

import "golang.org/x/sys/unix"

// threadCPU is the CPU time (user and system) the calling OS thread has
// used, and whether it could be read.
func threadCPU() (float64, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9, true
}
