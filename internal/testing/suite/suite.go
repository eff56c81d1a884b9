// Package suite starts a test package's shared fixture (an API server, a
// redis-server, a manager) when the first test asks for it, and stops it
// after the package's last test. Tests that never ask, the pure ones, run
// with plain `go test` on a machine without a cluster or Redis.
package suite

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// Suite is a fixture started at most once per test binary.
type Suite struct {
	setup func(onStop func(func() error)) error

	once  sync.Once
	err   error
	mu    sync.Mutex
	stops []func() error
}

// New returns a Suite that setup starts. setup registers, with onStop,
// what stops each part it started; they run in reverse order after the
// tests, or at once when setup fails half-way. A part that fails to stop
// (a manager that ended in an error) fails the test binary.
func New(setup func(onStop func(func() error)) error) *Suite {
	return &Suite{setup: setup}
}

// Use starts the fixture if no test has yet, and fails t when it could
// not be started, with setup's error (which says what to install).
func (s *Suite) Use(t testing.TB) {
	t.Helper()
	s.once.Do(func() {
		if s.err = s.setup(s.onStop); s.err != nil {
			_ = s.stop()
		}
	})
	if s.err != nil {
		t.Fatalf("starting the test suite's fixture: %v", s.err)
	}
}

// Main runs the tests and then stops whatever Use started; use it as
// os.Exit(s.Main(m)) in TestMain.
func (s *Suite) Main(m *testing.M) int {
	code := m.Run()
	if !s.stop() && code == 0 {
		code = 1
	}
	return code
}

func (s *Suite) onStop(f func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, f)
}

// stop stops every part, the last started first, and reports whether all
// stopped cleanly; errors go to stderr, as they belong to no test.
func (s *Suite) stop() bool {
	s.mu.Lock()
	stops := s.stops
	s.stops = nil
	s.mu.Unlock()
	ok := true
	for i := len(stops) - 1; i >= 0; i-- {
		if err := stops[i](); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the test suite's fixture: %v\n", err)
			ok = false
		}
	}
	return ok
}
