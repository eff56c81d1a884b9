// Package selfgrade grades how well a catalog finds its own tools, the
// measure behind a ToolCatalog's status.quality: each query of a tool
// (synthetic or example) is searched, left out of the tool's centroid,
// with the catalog's default method and settings against every tool;
// tools with fewer than two queries are not graded but still compete, and
// permissions, always-included tools and exact names play no part.
//
// A Grader grades the successive versions of one catalog, each from the
// grading before: a kept query is searched again only when its tool
// changed, when a tool that changed ranked in its top K or scores high
// enough in either arm to enter it, or when its turn in a rotating sample
// comes; every other query keeps its outcome. The sample makes up, within
// a bounded number of versions, for what no rule foresees (a word grown
// more common shifts every BM25 score a little). A Grader is not safe for
// concurrent use.
//
// Agents do not need this package: it is the operator's, kept apart from
// package toolcatalog's search API.
package selfgrade

import (
	// The grading searches the catalog's own index, with its internals.
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/index"
)

// K is the cut-off: a held-back query counts as found when its tool ranks
// in the top K.
const K = index.K

// Defaults of New: DefaultMaxSearches bounds one Grade of a catalog of
// MaxSearchesTools tools or more, and a Grade of a smaller catalog does as
// many more searches as it has fewer tools.
const (
	DefaultMaxSearches = index.DefaultMaxSearches
	MaxSearchesTools   = index.MaxSearchesTools
	DefaultSample      = index.DefaultSample
)

// A Grader of a catalog of KeptMinTools vectors or more keeps up to
// KeptBytes per graded query besides its vector.
const (
	KeptMinTools = index.KeptMinTools
	KeptBytes    = index.KeptBytes
)

type (
	// QuerySet is one tool's own queries with their vectors.
	QuerySet = index.QuerySet
	// Grading is how well a catalog finds its own tools.
	Grading = index.Grading
	// Outranked is a tool other tools rank above it for its own queries.
	Outranked = index.Outranked
	// ConfusablePair is two tools whose own queries retrieve each other.
	ConfusablePair = index.ConfusablePair
	// Grader grades the successive versions of one catalog.
	Grader = index.Grader
)

// New returns a Grader that searches at most maxSearches queries per
// Grade (by default as above when 0, no bound when negative), leaving the
// rest to the next Grade, and searches again sample tools' kept queries
// in turn (DefaultSample when 0).
func New(maxSearches, sample int) Grader {
	return index.NewGrader(maxSearches, sample)
}
