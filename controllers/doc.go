// Package controllers holds the reconcilers of ToolDefinition,
// ToolCatalog and ToolSource. They orchestrate and write Kubernetes
// status; the domain logic lives in internal/: the refresh pipeline in
// internal/catalog, a pass's Redis I/O in internal/published, a catalog's
// settings in internal/catalogconfig, MCP imports in internal/mcpsource.
//
// Each part of a status has one writer. A reconciler writes its own
// object's status with one merge patch per reconcile (patchStatus), from
// a copy whose conditions it set in one place from what its steps came
// to: a step's failure is a stepError that is stalled (the user must
// change something), waiting (an outside server) or transient (retried
// with backoff). A ToolDefinition's status.catalogs is the exception that
// keeps the rule: each catalog writes its own entry there by server-side
// apply under a field manager of its own (applyRecord), and the
// ToolDefinition reconciler derives Embedded, Ready and Confusable from
// those entries (tooldefinition_status.go). A catalog's grading writes
// status.quality after the pass that published the graded version.
// Events mark transitions only.
package controllers
