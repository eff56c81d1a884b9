package memtune

import (
	"runtime/debug"
	"testing"

	"github.com/go-logr/logr"
)

func TestSetLowersTheGCTarget(t *testing.T) {
	t.Setenv("AUTOMEMLIMIT", "off")
	for _, tc := range []struct {
		name, gogc string
		percent    int
		want       int
	}{
		{name: "default", percent: 50, want: 50},
		{name: "GOGC wins", gogc: "80", percent: 50, want: 100},
		{name: "zero keeps Go's", percent: 0, want: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gogc != "" {
				t.Setenv("GOGC", tc.gogc)
			}
			old := debug.SetGCPercent(100)
			defer debug.SetGCPercent(old)
			Set(logr.Discard(), tc.percent)
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Errorf("GC percent = %d, want %d", got, tc.want)
			}
		})
	}
}
