package index

import "unsafe"

// Bytes estimates the heap the grader holds: the rows and text index of
// the catalog it graded last and, per graded tool, the query set it keeps
// and, per query, its outcome, its kept ranking and a unit copy of a
// vector that was not of unit length. The document it indexed, whose text
// the index points into, is its caller's and not counted.
func (g *grader) Bytes() int64 {
	n := g.prev.heldBytes()
	if g.next != nil && g.next != g.prev {
		n += g.next.heldBytes()
	}
	for name, gt := range g.tools {
		n += mapEntryBytes(stringBytes+pointerBytes) + int64(len(name)) + int64(unsafe.Sizeof(*gt)) + gt.heldBytes()
	}
	return n
}

// mapEntryBytes is what one entry of a map whose key and value take slot
// bytes costs its table: as much again is counted for the free slots, a
// table being between 1.14 and 2.3 times as large as its entries.
func mapEntryBytes(slot int64) int64 { return 2*slot + 1 }

// Sizes of the headers the estimates count, in bytes.
const (
	stringBytes  = int64(unsafe.Sizeof(""))
	sliceBytes   = int64(unsafe.Sizeof([]byte(nil)))
	pointerBytes = int64(unsafe.Sizeof(uintptr(0)))
)

// heldBytes estimates the heap c holds besides its document: rows, names
// by row, look-ups and the text index.
func (c *Catalog) heldBytes() int64 {
	if c == nil {
		return 0
	}
	n := int64(cap(c.matrix))*4 + int64(cap(c.rawHash))*8 + int64(cap(c.rowOf))*8 + int64(cap(c.vecNames))*stringBytes
	if c.quant != nil {
		n += c.quant.Bytes()
	}
	n += int64(len(c.tools)) * mapEntryBytes(stringBytes+8)
	n += int64(len(c.Vectors)) * mapEntryBytes(stringBytes+sliceBytes)
	for _, at := range c.byRunes {
		n += mapEntryBytes(8+sliceBytes) + int64(cap(at))*8
	}
	return n + c.index.heldBytes()
}

// heldBytes estimates the heap ix holds besides the texts it indexed:
// its postings, terms and per-tool lengths.
func (ix *bm25Index) heldBytes() int64 {
	if ix == nil {
		return 0
	}
	n := int64(cap(ix.lengths))*8 + int64(cap(ix.docs))*int64(unsafe.Sizeof(docTerms{}))
	if ln := ix.norms.Load(); ln != nil {
		n += int64(cap(ln.norm)) * 8
	}
	for term, ps := range ix.postings {
		n += mapEntryBytes(stringBytes+sliceBytes) + int64(len(term)) + int64(cap(ps))*int64(unsafe.Sizeof(posting{}))
	}
	return n
}

// heldBytes estimates the heap gt holds, its query set's vectors included
// (their texts are the tool's metadata's).
func (gt *gradedTool) heldBytes() int64 {
	n := int64(cap(gt.outcomes)+cap(gt.kept))*pointerBytes + int64(cap(gt.units))*sliceBytes
	n += int64(cap(gt.set.Queries))*stringBytes + vectorsBytes(gt.set.Vectors)
	for _, in := range gt.set.IntentVectors {
		n += mapEntryBytes(8+sliceBytes) + vectorsBytes(in)
	}
	n += copiedBytes(gt.units, gt.set.Vectors)
	for i, units := range gt.intentUnits {
		n += mapEntryBytes(8+sliceBytes) + int64(cap(units))*sliceBytes + copiedBytes(units, gt.set.IntentVectors[i])
	}
	for _, o := range gt.outcomes {
		if o == nil {
			continue
		}
		n += int64(unsafe.Sizeof(*o)) + int64(cap(o.top)+cap(o.terms))*stringBytes
		for _, t := range o.terms {
			n += int64(len(t))
		}
		if o.blend != nil {
			n += int64(unsafe.Sizeof(*o.blend))
		}
		if o.intents != nil {
			n += o.intents.heldBytes()
		}
	}
	for _, k := range gt.kept {
		if k != nil {
			n += int64(unsafe.Sizeof(*k)) + int64(cap(k.rows))*int64(unsafe.Sizeof(keptRow{}))
		}
	}
	return n
}

// vectorsBytes is the heap vs takes.
func vectorsBytes(vs [][]float32) int64 {
	n := int64(cap(vs)) * sliceBytes
	for _, v := range vs {
		n += int64(cap(v)) * 4
	}
	return n
}

// copiedBytes counts the floats of units that are copies, not the
// vectors of from they were made of.
func copiedBytes(units, from [][]float32) int64 {
	var n int64
	for i, u := range units {
		if len(u) > 0 && (i >= len(from) || len(from[i]) == 0 || &u[0] != &from[i][0]) {
			n += int64(cap(u)) * 4
		}
	}
	return n
}
