// Package controllers holds the reconcilers of ToolDefinition,
// ToolCatalog and ToolSource. They orchestrate and write Kubernetes
// status; the domain logic lives in internal/: the refresh pipeline in
// internal/catalog, a pass's Redis I/O in internal/published, a catalog's
// settings in internal/catalogconfig, MCP imports in internal/mcpsource.
//
// A reconciler writes its own object's status with one merge patch per
// reconcile (patchStatus), from a copy whose conditions it set in one
// place from what its steps came to: a step's failure is a stepError that
// is stalled (the user must change something), waiting (an outside
// server) or transient (retried with backoff), and summarize sets the
// Stalled and Reconciling conditions kstatus reads from it. A
// ToolDefinition's status has a second kind of writer: each catalog that
// selects it applies its own record to status.catalogs, with the Embedded,
// Ready and Confusable conditions the records imply
// (tooldefinition_status.go), so that a change costs one write; the
// ToolDefinition reconciler's patch is guarded by the resourceVersion
// (patchStatusGuarded). A catalog's grading writes status.quality after
// the pass that published the graded version. Events mark transitions
// only.
package controllers
