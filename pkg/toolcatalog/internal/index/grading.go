package index

import (
	"context"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// K is the cut-off of self-grading: a tool's held-back query counts as
// found when the tool ranks in the top K.
const K = 5

// Defaults of a Grader. DefaultMaxSearches bounds one Grade of a catalog
// of MaxSearchesTools tools or more; a smaller catalog's searches cost
// less, and a Grade of it does as many more of them as it has fewer tools,
// so that it is graded in one go rather than in rounds a pause apart.
const (
	DefaultMaxSearches = 400
	MaxSearchesTools   = 2048
	DefaultSample      = 2
)

// A Grader of a catalog of KeptMinTools vectors or more keeps up to
// KeptBytes per graded query: the query's best-scoring rows, from which it
// ranks the next version without scoring every row again.
const (
	KeptMinTools = 2048
	KeptBytes    = 1024
)

// QuerySet is one tool's own queries (synthetic and example) with their
// vectors, embedded by the catalog's model, in the same order.
type QuerySet struct {
	Queries []string
	Vectors [][]float32
	// IntentVectors holds, by query index, the vectors of the intents of
	// a query that asks for several things (text.Intents), in order: the
	// grading searches it as a search does. Without them such a query is
	// searched whole by the semantic arm.
	IntentVectors map[int][][]float32
}

// Grading is how well a catalog finds its own tools.
type Grading struct {
	// Tools and Queries count what was graded: tools with at least two
	// queries, and their queries.
	Tools, Queries int
	// Searched counts the queries this grading searched; the others kept
	// the outcome of an earlier one.
	Searched int
	// Scanned counts the searched queries whose semantic arm scored every
	// tool's vector; the others ranked it from the rows they kept.
	Scanned int
	// SelfRecallAt5 is the share of graded queries whose tool ranked in
	// the top five.
	SelfRecallAt5 float64
	// Outranked lists the graded tools that some of their own queries did
	// not find in the top five, most missed first.
	Outranked []Outranked
	// Confusable lists pairs of tools whose queries rank the other tool
	// first, both ways, most similar first.
	Confusable []ConfusablePair
}

// Outranked is a tool other tools rank above it for its own queries.
type Outranked struct {
	Tool string
	// Missed of Queries held-back queries did not find the tool in the
	// top five.
	Missed, Queries int
	// By is the tool ranked first most often instead.
	By string
}

// ConfusablePair is two tools whose own queries retrieve each other.
type ConfusablePair struct {
	// A and B are the tools' names, A < B.
	A, B string
	// Similarity is the cosine of their centroids.
	Similarity float64
}

// Grader grades the successive versions of one catalog.
type Grader interface {
	// Index indexes doc, the version to grade next, from the version
	// graded last: digest says each tool's vector as it now is
	// (contract.VectorDigest of the raw vector, 0 for none), and read
	// returns the raw vectors of the tools named, which Index asks only
	// for those that changed, chunk at a time. touched, when not nil,
	// names every tool whose entry or vector may differ from the version
	// graded last, so that only those are looked at; nil when that is not
	// known.
	Index(doc *contract.Document, chunk int, digest func(name string) uint64, touched []string, read func(names []string) (map[string]string, error)) error
	// Grade grades the version Index indexed last with sets, the tools'
	// own queries, and returns how many due queries it left for the next
	// Grade.
	Grade(ctx context.Context, sets map[string]QuerySet) (*Grading, int, error)
	// Bytes estimates the heap the Grader holds: its index and the query
	// sets and outcomes it keeps, not the document it indexed.
	Bytes() int64
}
