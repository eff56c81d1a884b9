package retrieval

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteReport prints one row per method.
func WriteReport(w io.Writer, ms []*Metrics) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "method\trecall@1\trecall@5\trecall@10\thit@1\thit@5\thit@10\tMRR\tp50\tp90\tp99\tfallbacks")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\t%d\n", m.Method,
			m.Recall[1], m.Recall[5], m.Recall[10], m.Hit[1], m.Hit[5], m.Hit[10], m.MRR,
			round(m.P50), round(m.P90), round(m.P99), m.Fallbacks)
	}
	return tw.Flush()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}
