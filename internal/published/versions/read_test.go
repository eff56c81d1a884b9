package versions

import (
	"context"
	"testing"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// A version's grading replaces an earlier one of that version, and the
// gradings of versions no longer retained are dropped.
func TestRecordQualityKeepsTheRetainedVersions(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	record := func(version int64, recall float64, retain int) {
		t.Helper()
		if err := RecordQuality(ctx, c, k, contract.Quality{Version: version, SelfRecallAt5: recall, GradedQueries: 10, Graded: at}, retain); err != nil {
			t.Fatal(err)
		}
	}
	versions := func() []int64 {
		t.Helper()
		qs, err := contract.ReadQuality(ctx, c, k)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, q := range qs {
			out = append(out, q.Version)
		}
		return out
	}
	for v := int64(1); v <= 5; v++ {
		record(v, 0.5, 10)
	}
	if got := versions(); len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Fatalf("versions %v, want 1..5", got)
	}
	// The rest of version 5's searches graded it again.
	record(5, 0.9, 10)
	qs, _ := contract.ReadQuality(ctx, c, k)
	if len(qs) != 5 || qs[4].SelfRecallAt5 != 0.9 || !qs[4].Graded.Equal(at) {
		t.Fatalf("gradings %+v, want version 5 once, at 0.9", qs)
	}
	// Three versions retained: 6, 5 and 4.
	record(6, 0.7, 3)
	if got := versions(); len(got) != 3 || got[0] != 4 || got[2] != 6 {
		t.Fatalf("versions %v, want 4 5 6", got)
	}
}

// A stamp read alone is the stamp of a full read, and it moves when
// another writer publishes or a key is deleted by hand; the staged entries
// come with it.
func TestReadStampIsTheFullReadsStamp(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	empty, staged, err := ReadStamp(ctx, c, k)
	if err != nil || empty != (contract.Stamp{}) || len(staged.StagedVectors) != 0 {
		t.Fatalf("stamp of nothing %+v, staged %+v, %v", empty, staged, err)
	}
	d1 := testDoc(t, 1, "a", "b")
	write(t, c, k, nil, d1, map[string][]byte{"a": contract.EncodeVector([]float32{1, 0})})
	err = Stage(ctx, c, k, 1, map[string][]byte{"b": contract.EncodeVector([]float32{0, 1})}, map[string][]byte{"b": []byte(`{"spec_hash":"h-b"}`)})
	if err != nil {
		t.Fatal(err)
	}
	stamp, staged, err := ReadStamp(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := readDoc(t, c, k)
	if stamp != full.Stamp() || stamp.Version != 1 || stamp.Tools != 2 || stamp.Vectors != 1 {
		t.Fatalf("stamp %+v, full read's %+v", stamp, full.Stamp())
	}
	if len(staged.StagedVectors) != 1 || len(staged.StagedMetadata) != 1 || staged.StagedVectors["b"] == nil {
		t.Fatalf("staged %+v, want b's vector and metadata", staged)
	}
	if err = c.Del(ctx, k.Embeddings()).Err(); err != nil {
		t.Fatal(err)
	}
	if moved, _, _ := ReadStamp(ctx, c, k); moved == stamp {
		t.Fatalf("stamp %+v did not move when P:embeddings was deleted", moved)
	}
}
