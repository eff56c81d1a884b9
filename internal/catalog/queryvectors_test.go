package catalog

import (
	"testing"
	"time"
)

func TestQueryVectorsAreBoundedAndPerModel(t *testing.T) {
	var q QueryVectors
	texts := make([]string, MaxKeptQueryVectors+10)
	vecs := make([][]float32, len(texts))
	for i := range texts {
		texts[i] = time.Duration(i).String()
		vecs[i] = []float32{float32(i)}
	}
	q.Add("m1", texts, vecs)
	if q.Len() != MaxKeptQueryVectors {
		t.Fatalf("kept %d, want %d", q.Len(), MaxKeptQueryVectors)
	}
	if found, _ := q.Take("m2", texts[:3]); len(found) != 0 {
		t.Fatal("vectors of one model were returned for another")
	}
	q.Add("m1", texts[:1], vecs[:1])
	// The oldest made room: texts[10] for the one added again.
	if found, missing := q.Take("m1", texts[:12]); len(found) != 2 || len(missing) != 10 || found[texts[11]][0] != 11 {
		t.Fatalf("found %d, missing %d; want texts[0], added again, and texts[11] (texts[1..10], the oldest, made room)", len(found), len(missing))
	}
	// What was taken is no longer kept; the rest is.
	if q.Len() != MaxKeptQueryVectors-2 {
		t.Fatalf("kept %d after taking two", q.Len())
	}
	if found, missing := q.Take("m1", texts[:12]); len(found) != 0 || len(missing) != 12 {
		t.Fatalf("taken again: found %d, missing %d", len(found), len(missing))
	}
	found, missing := q.Take("m1", append(texts[12:], texts[12]))
	if len(found) != len(texts)-12 || len(missing) != 0 || q.Len() != 0 {
		t.Fatalf("the rest: found %d, missing %v, %d left", len(found), missing, q.Len())
	}
}
