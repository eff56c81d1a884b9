// Package controllers holds the reconcilers of ToolDefinition,
// ToolCatalog and ToolSource. They orchestrate and write Kubernetes
// status; the domain logic lives in internal/: the refresh pipeline in
// internal/catalog, a pass's Redis I/O in internal/published, a catalog's
// settings in internal/catalogconfig, MCP imports in internal/mcpsource,
// the grading of published versions in internal/grading.
//
// A reconciler writes its own object's status with one merge patch at
// the end of a reconcile (reconcile.PatchStatus, from internal/reconcile,
// the vocabulary they share; a catalog's first reconcile also
// says at once that its first pass is under way), from a copy whose
// conditions its steps set: each step owns its conditions (Published and
// EmbeddingsSynced of a catalog, Valid and Embedded of a tool, Synced of
// a source), and a step's failure is a *reconcile.Error that is stalled (the
// user must change something), waiting (an outside server) or transient
// (retried with backoff). reconcile.Summarize then derives Ready from the owned
// conditions, or from the failure, and the Stalled and Reconciling
// conditions kstatus reads; no step sets Ready. Each part of a status has
// one writer. A ToolDefinition's status is its reconciler's
// alone, the catalogs' records of the tool in status.catalogs included:
// a catalog's pass and grading hand the records to the Ledger, its
// records writer queues the tools whose record changed, and the
// ToolDefinition reconciler writes them with the Embedded, Ready and
// Confusable conditions they imply (tooldefinition_status.go), guarded
// by the resourceVersion (reconcile.PatchStatusGuarded), so a change costs one
// write. The grading (internal/grading) writes a catalog's
// status.quality after the pass that published the graded version, fed
// by the pass, and hands the confusable tools it finds to the ledger.
// Events mark transitions only.
package controllers
