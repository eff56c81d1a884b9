// Package versiondiff compares two versions of a catalog: the tools one
// added, removed and changed, with a description and schema diff. The
// console's version comparison and kubectl toolcatalog diff show it.
package versiondiff

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
)

// Diff is what changed from one version to another.
type Diff struct {
	Added, Removed []string
	Changed        []Change
	// Same counts the tools both hold alike.
	Same int
}

// Change is a tool that two versions hold differently.
type Change struct {
	Name                    string
	FromDescription, ToDesc string
	// ParametersDiff is a unified diff of the indented parameter schemas,
	// empty when they are the same; Other names the other fields that
	// changed.
	ParametersDiff string
	Other          []string
}

// Compare lists what changed from one version's tools to another's.
func Compare(from, to *contract.Document) Diff {
	var d Diff
	old := map[string]contract.Tool{}
	for _, t := range from.Tools {
		old[t.Name] = t
	}
	seen := map[string]bool{}
	for _, t := range to.Tools {
		seen[t.Name] = true
		o, ok := old[t.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, t.Name)
		case reflect.DeepEqual(o, t):
			d.Same++
		default:
			d.Changed = append(d.Changed, changeOf(o, t))
		}
	}
	for _, t := range from.Tools {
		if !seen[t.Name] {
			d.Removed = append(d.Removed, t.Name)
		}
	}
	return d
}

func changeOf(a, b contract.Tool) Change {
	c := Change{Name: b.Name}
	if a.Description != b.Description {
		c.FromDescription, c.ToDesc = a.Description, b.Description
	}
	if !bytes.Equal(a.Parameters, b.Parameters) {
		c.ParametersDiff = udiff.Unified("parameters", "parameters", Indent(a.Parameters), Indent(b.Parameters))
	}
	for name, differs := range map[string]bool{
		"toolset":        a.Toolset != b.Toolset,
		"always include": a.AlwaysInclude != b.AlwaysInclude,
		"annotations":    !reflect.DeepEqual(a.Annotations, b.Annotations),
		"output schema":  !bytes.Equal(a.OutputSchema, b.OutputSchema),
		"icons":          !reflect.DeepEqual(a.Icons, b.Icons),
		"source":         !reflect.DeepEqual(a.Source, b.Source),
	} {
		if differs {
			c.Other = append(c.Other, name)
		}
	}
	slices.Sort(c.Other)
	return c
}

// Indent is a JSON document indented, as the diffs show it; raw as it
// is when it does not parse.
func Indent(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw) + "\n"
	}
	return b.String() + "\n"
}
