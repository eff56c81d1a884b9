// Package memtune sets the Go runtime's memory targets of a process that
// runs in a container.
package memtune

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// Set keeps the Go heap under 90% of the container's memory limit, read
// from the cgroup (AUTOMEMLIMIT or GOMEMLIMIT override it): near the limit
// the runtime collects harder instead of being killed. Unless GOGC is set,
// it also collects when the heap has grown by gcPercent since the last
// collection; 0 keeps Go's default of 100.
func Set(log logr.Logger, gcPercent int) {
	_, _ = memlimit.Set(memlimit.WithLogger(slog.New(logr.ToSlogHandler(log))))
	if _, set := os.LookupEnv("GOGC"); gcPercent > 0 && !set {
		debug.SetGCPercent(gcPercent)
	}
}
