// Package controllers holds the reconcilers of ToolDefinition and
// ToolCatalog. They orchestrate; the domain logic lives in internal/.
package controllers
