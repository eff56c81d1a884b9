// Package controllers is the envtest suite of the three reconcilers,
// one package per kind beneath it: toolcatalog (a catalog's passes,
// published as versions), tooldefinition (a tool's validity and the
// catalogs' records of it), toolsource (tools imported from an MCP
// server, upstream changes held for approval). No kind's package reaches
// into another's; what two share is below them in internal/: the
// reconcile vocabulary (internal/reconcile), reads of the cache
// (internal/kube/cached), the records a pass hands to the ToolDefinition
// reconciler (internal/records). internal/manager builds every
// collaborator once and hands it in.
//
// A reconciler orchestrates and writes Kubernetes status; the domain
// logic lives in internal/: the pass (catalog.Pass) and its steps in
// internal/catalog, its Redis I/O in internal/published, a catalog's
// settings in internal/catalogconfig, MCP imports in internal/mcpsource,
// the grading of published versions in internal/grading.
//
// A reconciler writes its own object's status with one merge patch at
// the end of a reconcile (reconcile.PatchStatus; a catalog's first
// reconcile also says at once that its first pass is under way), from a
// copy whose conditions its steps set: each step owns its conditions
// (Published and EmbeddingsSynced of a catalog, Valid and Embedded of a
// tool, Synced of a source), and a step's failure is a *reconcile.Error
// that is stalled (the user must change something), waiting (an outside
// server) or transient (retried with backoff). reconcile.Summarize then
// derives Ready from the owned conditions, or from the failure, and the
// Stalled and Reconciling conditions kstatus reads; no step sets Ready.
// Each part of a status has one writer. A ToolDefinition's status is its
// reconciler's alone, the catalogs' records of the tool in
// status.catalogs included: a catalog's pass and grading hand the records
// to records.Writer, which keeps them in the Ledger and tells the
// ToolDefinition reconciler the tools whose record changed; it writes
// them with the Embedded, Ready and Confusable conditions they imply
// (tooldefinition/status.go), guarded by the resourceVersion
// (reconcile.PatchStatusGuarded), so a change costs one write. The
// grading (internal/grading) writes a catalog's status.quality after the
// pass that published the graded version, fed by the pass, and hands the
// confusable tools it finds to the records writer. Events mark
// transitions only.
//
// The suite's tests need the API server because its behaviour is their
// subject (admission, watches, status patches, RBAC, events); what a
// pass does is tested against the pass, with in-process ports, in
// internal/catalog.
package controllers
