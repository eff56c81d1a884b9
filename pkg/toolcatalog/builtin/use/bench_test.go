package use

import "testing"

// BenchmarkLoad measures parsing the embedded float16 weights into the
// float32 tensors the forward pass uses: the model's resident memory.
func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEmbed measures one query's forward pass, as a search embeds it:
// a request of 8 words and one of 40.
func BenchmarkEmbed(b *testing.B) {
	m, err := Load()
	if err != nil {
		b.Fatal(err)
	}
	for name, text := range map[string]string{
		"words=8":  "will it rain in Lisbon tomorrow afternoon please",
		"words=40": "I need to book a flight from Oslo to Lisbon next Tuesday morning, then find a hotel near the old town for three nights, and finally send the itinerary by email to my manager so she can approve the travel budget before Friday",
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Embed(text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
