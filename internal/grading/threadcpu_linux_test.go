package grading

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/toolcatalog/tool-catalog-operator/internal/catalog"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/selfgrade"
)

// A grading's CPU is read from the thread it ran on: the first grading of
// 300 tools' 1,500 queries spends some, and no more than the process did
// meanwhile.
func TestGradingCountsItsThreadsCPU(t *testing.T) {
	stored, vectors := gradedCatalog(t, 300, 12)
	st := &gradeState{grader: selfgrade.New(-1, 0)}
	job := &gradeJob{version: 1, stored: stored, emb: embedding.LexicalEmbedder{}, changed: map[string]bool{}, queries: &catalog.QueryVectors{},
		vectors: func(_ context.Context, names []string) (map[string]string, error) {
			out := make(map[string]string, len(names))
			for _, n := range names {
				out[n] = vectors[n]
			}
			return out, nil
		}}
	process0 := processCPU(t)
	g, _, cpu, err := st.gradeOnThread(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	process := processCPU(t) - process0
	t.Logf("searched %d queries: %.3fs of the thread's CPU, %.3fs of the process's", g.Searched, cpu, process)
	if g.Searched == 0 || cpu <= 0 || cpu > process {
		t.Fatalf("a grading of %d searches counted %.6fs of CPU, the process %.6fs", g.Searched, cpu, process)
	}
}

// processCPU is the CPU time the test process has spent.
func processCPU(t *testing.T) float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
