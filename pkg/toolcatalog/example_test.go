package toolcatalog_test

import (
	"context"
	"fmt"

	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// A catalog built from a document (as Load reads one from Redis) is
// searched with BM25 when no query embedder is given.
func ExampleCatalog_Search() {
	doc := &contract.Document{Version: 1, Catalog: "team/tools"}
	for _, t := range []contract.Tool{
		{Name: "get_weather", Description: "Get the current weather and the forecast for a city."},
		{Name: "send_email", Description: "Send an email message to a recipient."},
		{Name: "create_issue", Description: "Open an issue in a GitHub repository."},
	} {
		norm, err := contract.NormalizeTool(t)
		if err != nil {
			panic(err)
		}
		doc.Tools = append(doc.Tools, norm)
	}
	if err := doc.Seal(); err != nil {
		panic(err)
	}
	cat, err := toolcatalog.New(doc, nil)
	if err != nil {
		panic(err)
	}
	resp, err := cat.Search(context.Background(), "what is the weather forecast in Oslo", toolcatalog.Options{Method: toolcatalog.BM25, TopK: 1})
	if err != nil {
		panic(err)
	}
	for _, r := range resp.Results {
		fmt.Println(r.Tool.Name, r.Why)
	}
	// Output: get_weather ranked
}
