package contract

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestRecordedRequestsAreCountedTrimmedAndPurged(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	now := time.Unix(1_800_000_000, 0)
	record := func(req, tool string, at time.Time) {
		t.Helper()
		if err := RecordRequest(ctx, c, k, req, tool, at); err != nil {
			t.Fatal(err)
		}
	}
	record("  book   the fishbowl ", "book_room", now)
	record("book the fishbowl", "book_room", now)
	record("what is the weather", "get_weather", now)
	record("old request", "get_weather", now.Add(-48*time.Hour))
	record("   ", "get_weather", now)                          // blank: ignored
	record(strings.Repeat("é", MaxRequestLength+10), "x", now) // cut

	got, err := TrimRequests(ctx, c, k, now.Add(-24*time.Hour), 2)
	if err != nil {
		t.Fatal(err)
	}
	// The old one is past retention; of the other three, the cap keeps
	// the two most recorded.
	if len(got) != 2 || got[0].Tool != "book_room" || got[0].Request != "book the fishbowl" || got[0].Count != 2 || !got[0].Seen.Equal(now) {
		t.Fatalf("trimmed to %+v", got)
	}
	if n := c.ZCard(ctx, k.RequestsSeen()).Val(); n != 2 {
		t.Fatalf("%d members last seen, want the 2 kept", n)
	}
	if err := PurgeRequests(ctx, c, k); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, k.Requests(), k.RequestsSeen()).Val(); n != 0 {
		t.Fatalf("%d request keys left after purging", n)
	}
}
