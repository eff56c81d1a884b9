package suite

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// recorder is a testing.TB that records a fatal failure instead of
// stopping the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

// The fixture starts once, however many tests use it, and its parts
// stop in reverse order.
func TestSuiteStartsOnceAndStopsInReverse(t *testing.T) {
	starts := 0
	var stopped []string
	s := New(func(onStop func(func() error)) error {
		starts++
		onStop(func() error { stopped = append(stopped, "first"); return nil })
		onStop(func() error { stopped = append(stopped, "second"); return nil })
		return nil
	})
	for range 3 {
		s.Use(t)
	}
	if starts != 1 {
		t.Fatalf("started %d times; want once", starts)
	}
	if !s.stop() || !slices.Equal(stopped, []string{"second", "first"}) {
		t.Fatalf("stopped %v; want second, then first", stopped)
	}
}

// A fixture that fails half-way stops what it started at once, and every
// test that uses it fails with the setup's error.
func TestSuiteThatCannotStartFailsItsTests(t *testing.T) {
	stopped := false
	s := New(func(onStop func(func() error)) error {
		onStop(func() error { stopped = true; return nil })
		return errors.New("redis-server not found in PATH")
	})
	for range 2 {
		r := &recorder{TB: t}
		s.Use(r)
		if !strings.Contains(r.failed, "redis-server not found in PATH") {
			t.Fatalf("a test that used a fixture that could not start failed with %q; want the setup's error", r.failed)
		}
	}
	if !stopped {
		t.Fatal("what the setup started before it failed was not stopped")
	}
}
