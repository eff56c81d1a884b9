package contract

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// Uses decay: a day's uses count 2^(-age/half-life), and uses older than
// the window count for nothing.
func TestMostUsedDecays(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	use := func(tool string, times int, daysAgo int) {
		t.Helper()
		for i := range times {
			// One principal per use, so the per-principal cap is not
			// what is measured.
			if ok, err := RecordUse(ctx, c, k, fmt.Sprintf("user:%d", i), tool, now.AddDate(0, 0, -daysAgo)); err != nil || !ok {
				t.Fatalf("RecordUse: %v %v", ok, err)
			}
		}
	}
	use("last_month", 30, 21) // 30 · 2^-3 = 3.75
	use("this_week", 5, 0)    // 5
	use("yesterday", 4, 1)    // 4 · 2^(-1/7) ≈ 3.63
	use("forgotten", 100, UsageWindow)
	top, err := MostUsed(ctx, c, k, 10, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"this_week", "last_month", "yesterday"}
	if len(top) != len(want) {
		t.Fatalf("top used %+v, want %v", top, want)
	}
	for i, w := range want {
		if top[i].Tool != w {
			t.Fatalf("top used %+v, want %v", top, want)
		}
	}
	if math.Abs(top[1].Score-3.75) > 1e-9 {
		t.Errorf("30 uses 21 days ago score %v, want 3.75", top[1].Score)
	}
	if top, _ := MostUsed(ctx, c, k, 1, now); len(top) != 1 || top[0].Tool != "this_week" {
		t.Errorf("top 1: %+v", top)
	}
	if ttl := c.TTL(ctx, k.UsageDay(UsageDayOf(now))).Val(); ttl <= 0 || ttl > (UsageWindow+1)*24*time.Hour {
		t.Errorf("a day's bucket expires in %v, want within the window", ttl)
	}
}

// One principal calling a tool in a loop adds at most MaxUsesPerPrincipal
// a day; another principal still counts.
func TestRecordUseCapsOnePrincipal(t *testing.T) {
	ctx := context.Background()
	c, k := newClient(t)
	now := time.Now()
	counted := 0
	for range MaxUsesPerPrincipal + 50 {
		ok, err := RecordUse(ctx, c, k, "", "loop", now)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			counted++
		}
	}
	if counted != MaxUsesPerPrincipal {
		t.Fatalf("%d uses counted, want the cap %d", counted, MaxUsesPerPrincipal)
	}
	if ok, _ := RecordUse(ctx, c, k, "user:bo", "loop", now); !ok {
		t.Error("another principal's use was not counted")
	}
	// Two principals make no tool the most used, however many uses they
	// add; a third does.
	if top, err := MostUsed(ctx, c, k, 1, now); err != nil || len(top) != 0 {
		t.Fatalf("top after two principals' uses %+v, %v; want none", top, err)
	}
	if ok, _ := RecordUse(ctx, c, k, "user:cy", "loop", now); !ok {
		t.Error("a third principal's use was not counted")
	}
	top, _ := MostUsed(ctx, c, k, 1, now)
	if len(top) != 1 || top[0].Score != MaxUsesPerPrincipal+2 {
		t.Fatalf("top %+v, want %d uses", top, MaxUsesPerPrincipal+2)
	}
	if n := c.HLen(ctx, k.UsageBy(UsageDayOf(now))).Val(); n != 3 {
		t.Errorf("%d principal-tool counters, want 3", n)
	}
	if ok, err := RecordUse(ctx, c, k, "user:bo", "", now); ok || err != nil {
		t.Errorf("a blank tool: %v %v", ok, err)
	}
}
