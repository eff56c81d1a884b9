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
