package controllers

import "time"

// now reads clock, time.Now when nil: reconcilers take their clock as a
// field so tests can set it.
func now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}
