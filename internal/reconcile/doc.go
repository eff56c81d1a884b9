// Package reconcile is the vocabulary the three reconcilers share to say
// what a reconcile came to, after Flux's internal/error and
// internal/reconcile/summarize and Cluster API's patch helper:
//
//   - a step's failure is an *Error of a Kind (Transient, Waiting,
//     Stalled) with the condition reason and a message that says what to
//     fix; domain code returns it itself, so nothing classifies after the
//     fact;
//   - Summarize derives Ready from the conditions a reconcile's steps own,
//     or from the failure, and the Stalled and Reconciling conditions
//     kstatus reads; no step sets Ready;
//   - the status is written once (PatchStatus, PatchStatusGuarded), events
//     mark transitions only (RecordReady), and the requeue follows from
//     the error's kind (RequeueFor);
//   - QuietOnShutdown keeps a stopping manager's canceled reconciles out
//     of the error log.
//
// controller-runtime's own package of this name is imported here as
// crreconcile; the reconcilers reach its types through ctrl.
package reconcile
