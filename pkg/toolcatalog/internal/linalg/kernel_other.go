//go:build !amd64

package linalg

// Kernels lists the kernels this CPU runs: none off amd64, where every
// product is gonum's.
func Kernels() []*Kernel { return nil }
