package catalog

// Hold is what a catalog serves after a pass saw its pin.
type Hold struct {
	// Version is the version served while pinned; 0 when the catalog is
	// not pinned.
	Version int64
	// Changed counts the tools the current version added, removed or
	// changed since Version.
	Changed int
	// Set and Cleared say that this pass wrote or deleted the pinned copy.
	Set, Cleared bool
	// Refused says why the version asked for cannot be pinned
	// (the store refuses to pin it); Version is then what is still served pinned,
	// if anything.
	Refused error
}
