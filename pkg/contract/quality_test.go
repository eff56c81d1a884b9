package contract

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// What sits in P:quality is checked: members the operator could not have
// written are left out.
func TestReadQualityRefusesForeignMembers(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	for member, score := range map[string]float64{
		`{"version":2,"self_recall_at_5":0.8}`:   2, // as the operator writes it
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
