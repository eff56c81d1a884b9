package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed reference must match the CRDs: run `make docs` after
// changing the API types.
func TestAPIReferenceIsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	got, err := Generate(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/api.md is out of date: run `make docs` and commit it")
	}
	for _, s := range []string{"## ToolDefinition", "## ToolCatalog", "`spec.name` (required)", "`spec.search.method`", `one of "semantic", "bm25", "hybrid"`, "`status.specHash`"} {
		if !bytes.Contains(got, []byte(s)) {
			t.Errorf("reference lacks %q", s)
		}
	}
}
