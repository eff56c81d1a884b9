// Package catalog holds the pure logic of tool catalogs: the canonical spec
// hash that detects description drift and the validation of a tool's
// parameters schema. It has no Kubernetes or Redis dependency.
package catalog
