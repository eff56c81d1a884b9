package evaluation

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteReport prints one row per method, then one per method and part of
// the set when the set has parts (method/part, without latencies).
func WriteReport(w io.Writer, ms []*Metrics) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "method\tqueries\trecall@1\trecall@5\trecall@10\thit@1\thit@5\thit@10\tMRR\tnDCG@10\tcomplete@5\tcomplete@10\tp50\tp90\tp99\tfallbacks")
	row := func(name string, m *Metrics, latency string) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%d\n", name, m.Queries,
			m.Recall[1], m.Recall[5], m.Recall[10], m.Hit[1], m.Hit[5], m.Hit[10], m.MRR, m.NDCG10, m.Complete[5], m.Complete[10],
			latency, m.Fallbacks)
	}
	for _, m := range ms {
		row(string(m.Method), m, fmt.Sprintf("%s\t%s\t%s", round(m.P50), round(m.P90), round(m.P99)))
	}
	for _, m := range ms {
		for _, part := range m.Splits {
			row(string(m.Method)+"/"+part.Split, part, "\t\t")
		}
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
