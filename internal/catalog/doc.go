// Package catalog holds the domain logic of a catalog refresh as a
// pipeline of steps over plain values, so every rule is tested without an
// API server or Redis:
//
//	Select (ToolDefinitions → tools and rejections)
//	ReadStored (Redis snapshot → parsed state)  ReadRequest (annotations)
//	Plan (stale/invalid classification → an action per tool)
//	Refresh (providers: queries and centroids → results and failures)
//	BuildDocument (→ the document and the writes of a new version)
//	Outcome (→ counts, conditions, records, event text)
//
// The controller gathers the inputs, runs the steps and writes what they
// return; data flows from controllers/ to here to pkg/contract, never back.
// It also holds the canonical spec hash and parameters validation.
package catalog
