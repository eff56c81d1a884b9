// Package embedding turns tool queries into vectors and generates synthetic
// queries, behind small provider interfaces.
package embedding
