// Package controllers holds the reconcilers of ToolDefinition,
// ToolCatalog and ToolSource. They orchestrate; the domain logic lives in
// internal/.
package controllers
