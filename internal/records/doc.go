// Package records takes the ToolDefinitions' records of the catalogs'
// passes and gradings to the ToolDefinition reconciler, the one writer of
// a ToolDefinition's status. The route of a record is three steps: a
// pass's outcome goes to Writer.Submit (a grading's confusable tools to
// Writer.Graded), which keeps it in the Ledger and queues the catalog;
// the writer's turn finds the ToolDefinitions whose record differs from
// the ledger's and tells them on Ledger.Source; the ToolDefinition
// reconciler writes each with Ledger.RecordFor.
package records
