package contract

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A version's grading replaces an earlier one of that version, and the
// gradings of versions no longer retained are dropped.
func TestRecordQualityKeepsTheRetainedVersions(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	record := func(version int64, recall float64, retain int) {
		t.Helper()
		if err := RecordQuality(ctx, c, k, Quality{Version: version, SelfRecallAt5: recall, GradedQueries: 10, Graded: at}, retain); err != nil {
			t.Fatal(err)
		}
	}
	versions := func() []int64 {
		t.Helper()
		qs, err := ReadQuality(ctx, c, k)
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
	qs, _ := ReadQuality(ctx, c, k)
	if len(qs) != 5 || qs[4].SelfRecallAt5 != 0.9 || !qs[4].Graded.Equal(at) {
		t.Fatalf("gradings %+v, want version 5 once, at 0.9", qs)
	}
	// Three versions retained: 6, 5 and 4.
	record(6, 0.7, 3)
	if got := versions(); len(got) != 3 || got[0] != 4 || got[2] != 6 {
		t.Fatalf("versions %v, want 4 5 6", got)
	}
}

// What sits in P:quality is checked: members RecordQuality could not have
// written are left out.
func TestReadQualityRefusesForeignMembers(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	if err := RecordQuality(ctx, c, k, Quality{Version: 2, SelfRecallAt5: 0.8}, 10); err != nil {
		t.Fatal(err)
	}
	for member, score := range map[string]float64{
		`not json`:                               1,
		`{"version":7,"self_recall_at_5":0.5}`:   3, // a score that is not its version
		`{"version":4,"self_recall_at_5":7}`:     4, // out of range
		`{"version":5,"self_recall_at_5":"NaN"}`: 5,
		`{"version":6,"graded_queries":-1}`:      6,
	} {
		if err := c.ZAdd(ctx, k.Quality(), redis.Z{Score: score, Member: member}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := ReadQuality(ctx, c, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].Version != 2 {
		t.Fatalf("gradings %+v, want version 2 alone", qs)
	}
	if !slices.Contains(DeletedKeys(k, 2, time.Now()), k.Quality()) {
		t.Fatalf("a catalog's deletion leaves P:quality")
	}
}
