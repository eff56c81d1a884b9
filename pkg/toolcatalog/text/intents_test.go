package text

import (
	"slices"
	"strings"
	"testing"
)

func TestIntentsSplitsRequestsOfSeveralThings(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Find flights to Paris, check the weather there and convert 500 dollars to euros.",
			[]string{"Find flights to Paris", "check the weather there", "convert 500 dollars to euros"}},
		{"Please retrieve the timeline for project abc123. Then, check the FDA approval status of Aspirin. Finally, get the weather on Mars!",
			[]string{"Please retrieve the timeline for project abc123", "Then, check the FDA approval status of Aspirin", "Finally, get the weather on Mars"}},
		{"Is it a good time to invest in crypto? Also, can you list tourist attractions in Tokyo?",
			[]string{"Is it a good time to invest in crypto?", "Also, can you list tourist attractions in Tokyo?"}},
		{"Summarize the quarterly report, and then email it to the finance team",
			[]string{"Summarize the quarterly report", "email it to the finance team"}},
		{"- restart the payments service\n- open an incident ticket\n1. page the on-call engineer",
			[]string{"restart the payments service", "open an incident ticket", "page the on-call engineer"}},
		{`Deploy "app.py" on the staging server. After that, rotate the database password.`,
			[]string{`Deploy "app.py" on the staging server`, "After that, rotate the database password"}},
	}
	for _, tt := range tests {
		if got := Intents(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Intents(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// A request for one thing is never split: not by a sentence that only
// asks for help, a list of nouns, an abbreviation or a decimal.
func TestIntentsKeepsOneIntentWhole(t *testing.T) {
	for _, in := range []string{
		"What's the weather in Paris tomorrow?",
		"I want to keep a record of my meals. Can you help me with that?",
		"Compare flights to Paris, London and Rome for next weekend.",
		"Search and replace text in a file",
		"Book a table with Dr. Smith at 7 p.m. tomorrow.",
		"Convert 3.5 kg to pounds, e.g. for a recipe.",
		"Thanks! Translate this into French.",
		"Play some jazz and then stop",
		"",
		"   ",
		"?!.",
	} {
		if got := Intents(in); got != nil {
			t.Errorf("Intents(%q) = %q, want it whole (nil)", in, got)
		}
	}
}

func TestIntentsAreBoundedAndDeterministic(t *testing.T) {
	var b strings.Builder
	for i := range 20 {
		b.WriteString("Please fetch the sales report number ")
		b.WriteString(strings.Repeat("x", i+1))
		b.WriteString(". ")
	}
	req := b.String()
	got := Intents(req)
	if len(got) != MaxIntents {
		t.Fatalf("%d intents, want MaxIntents (%d)", len(got), MaxIntents)
	}
	if !strings.HasSuffix(got[MaxIntents-1], strings.Repeat("x", 20)) {
		t.Errorf("the last intent %q does not hold the rest of the request", got[MaxIntents-1])
	}
	for _, in := range got {
		if !strings.Contains(req, in) {
			t.Errorf("intent %q is not a piece of the request", in)
		}
	}
	if again := Intents(req); !slices.Equal(again, got) {
		t.Errorf("a second split differs: %q", again)
	}
}

func FuzzIntents(f *testing.F) {
	f.Add("Find flights to Paris, check the weather there and convert 500 dollars.")
	f.Add("a. b! c? d;\n- e")
	f.Add("\"Dr.\" ; , and then , also")
	f.Fuzz(func(t *testing.T, req string) {
		got := Intents(req)
		if len(got) == 1 || len(got) > MaxIntents {
			t.Fatalf("%d intents", len(got))
		}
		for _, in := range got {
			if in == "" || !strings.Contains(req, in) {
				t.Fatalf("intent %q is empty or not a piece of %q", in, req)
			}
		}
	})
}
