// Package crd holds the project's CustomResourceDefinitions, as
// controller-gen writes them under bases/, for the programs that read
// them offline (the check run in pull requests).
package crd

import "embed"

// Bases holds bases/*.yaml, one CustomResourceDefinition each.
//
//go:embed bases/*.yaml
var Bases embed.FS
