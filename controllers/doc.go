// Package controllers holds the reconcilers of ToolDefinition,
// ToolCatalog and ToolSource. They orchestrate and write Kubernetes
// status; the domain logic lives in internal/: the refresh pipeline in
// internal/catalog, a pass's Redis I/O in internal/published, a catalog's
// settings in internal/catalogconfig, MCP imports in internal/mcpsource.
//
// All three report status the same way (status.go): a step's failure is a
// stepError that is stalled (the user must change something), waiting
// (an outside server) or transient (retried with backoff); conditions are
// set in one place per reconciler, the status is written once, and events
// mark transitions only.
package controllers
