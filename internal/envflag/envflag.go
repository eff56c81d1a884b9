// Package envflag gives the binaries' flags defaults from environment
// variables, so a Deployment can set either.
package envflag

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// String is the variable key, or def when it is not set.
func String(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// Float is the variable key as a number, or def when it is not one.
func Float(key string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(key), 64); err == nil {
		return v
	}
	return def
}

// Duration is the variable key as a duration, or def when it is not one.
func Duration(key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

// List splits a comma-separated value, blanks dropped.
func List(v string) []string {
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
