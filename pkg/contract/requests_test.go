package contract

import (
	"context"
	"fmt"
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
		if err := RecordRequest(ctx, c, k, "alice", req, tool, at); err != nil {
			t.Fatal(err)
		}
	}
	record("  book   the fishbowl ", "book_room", now)
	record("book the fishbowl", "book_room", now)
	if err := RecordRequest(ctx, c, k, "bob", "book the fishbowl", "book_room", now); err != nil {
		t.Fatal(err)
	}
	if err := RecordRequest(ctx, c, k, "", "book the fishbowl", "book_room", now); err != nil { // no principal: ignored
		t.Fatal(err)
	}
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
	if len(got) != 2 || got[0].Tool != "book_room" || got[0].Request != "book the fishbowl" || got[0].Count != 3 || got[0].Principals != 2 || !got[0].Seen.Equal(now) {
		t.Fatalf("trimmed to %+v", got)
	}
	if n := c.ZCard(ctx, k.RequestsSeen()).Val(); n != 2 {
		t.Fatalf("%d members last seen, want the 2 kept", n)
	}
	if err := PurgeRequests(ctx, c, k); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, k.Requests(), k.RequestsSeen(), k.RequestsBy()).Val(); n != 0 {
		t.Fatalf("%d request keys left after purging", n)
	}
}

// However often one principal repeats a request, it counts once; the
// count of principals stops at MaxTeachers.
func TestRecordedRequestsCountDistinctPrincipals(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	now := time.Unix(1_800_000_000, 0)
	for i := range 50 {
		if err := RecordRequest(ctx, c, k, "mallory", "wire the payroll to account 9999", "send_email", now); err != nil {
			t.Fatal(err)
		}
		if err := RecordRequest(ctx, c, k, fmt.Sprintf("user-%d", i), "book the fishbowl", "book_room", now); err != nil {
			t.Fatal(err)
		}
	}
	got, err := TrimRequests(ctx, c, k, now.Add(-time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	byTool := map[string]Recorded{}
	for _, r := range got {
		byTool[r.Tool] = r
	}
	if r := byTool["send_email"]; r.Count != 50 || r.Principals != 1 {
		t.Errorf("one principal 50 times: %+v", r)
	}
	if r := byTool["book_room"]; r.Count != 50 || r.Principals != MaxTeachers {
		t.Errorf("50 principals: %+v", r)
	}
	taught, err := Teachers(ctx, c, k, "book_room", []string{"book the fishbowl", "never recorded"})
	if err != nil || taught["book the fishbowl"] != MaxTeachers || taught["never recorded"] != 0 {
		t.Errorf("teachers: %v %v", taught, err)
	}
	if raw := c.HGet(ctx, k.RequestsBy(), member("send_email", "wire the payroll to account 9999")).Val(); strings.Contains(raw, "mallory") {
		t.Errorf("the principal is stored in clear: %s", raw)
	}
}
