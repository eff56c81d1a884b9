//go:build !amd64

package use

// kernels lists the kernels this CPU runs: none off amd64, where every
// product is gonum's.
func kernels() []*kernel { return nil }
