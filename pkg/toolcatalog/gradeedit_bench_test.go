package toolcatalog

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"

	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/internal/gradehook"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog/text"
)

// The shared shape of make bench-scale: long descriptions from templates
// over verbs, nouns and systems, and generated requests drawn from a fixed
// 20, a third of them asking for two things, so that many tools share
// each request and its intents.
var (
	sharedVerbs = []string{"Find", "Create", "Update", "Delete", "List", "Export", "Import", "Archive", "Restore", "Approve",
		"Reject", "Assign", "Close", "Reopen", "Merge", "Split", "Tag", "Sync", "Audit", "Summarize"}
	sharedNouns = []string{"invoice", "order", "ticket", "shipment", "account", "payment", "product", "subscription", "user", "contract",
		"lead", "campaign", "asset", "device", "incident", "project", "task", "vendor", "warehouse", "report",
		"meeting", "document", "expense", "refund", "deployment"}
	sharedSystems = []string{"Salesforce", "Zendesk", "Jira", "SAP", "Workday", "HubSpot", "ServiceNow", "Stripe", "Shopify", "NetSuite",
		"GitHub", "Slack", "Confluence", "Asana", "Okta", "Datadog", "PagerDuty", "Intercom", "Xero", "Airtable"}
	sharedRequests = []string{"will it rain tomorrow in Paris", "scale the api deployment to 5 replicas and also check the error logs", "find the invoice for order 1234, then email it to the customer",
		"who owns the checkout service", "close all tickets older than 30 days. Then notify their owners", "export last month's expenses to a spreadsheet, then share it with finance",
		"what meetings do I have this afternoon", "refund the duplicate payment from yesterday and also tell the customer", "assign the outage incident to the on-call engineer",
		"list the deployments that failed today, then restart them", "summarize the contract with Acme", "approve the pending purchase orders",
		"sync the customer list with the CRM", "archive the projects finished last year", "restore the document I deleted",
		"tag the open leads from the campaign", "audit who changed the admin settings", "merge the duplicate accounts for Jane Doe",
		"update the shipping address on my order", "create a task to renew the subscription"}
)

// sharedTool is tool i of the shared shape.
func sharedTool(i int) (name, description string) {
	v := sharedVerbs[i%len(sharedVerbs)]
	n := sharedNouns[i/len(sharedVerbs)%len(sharedNouns)]
	sys := sharedSystems[i/(len(sharedVerbs)*len(sharedNouns))%len(sharedSystems)]
	return fmt.Sprintf("%s_%s_%d", strings.ToLower(v), n, i), fmt.Sprintf(
		"%s %s records in %s for workspace %d. Accepts filters such as date range, owner and status, and returns matching %ss with ids, timestamps and links. Use when the user asks to %s a %s.",
		v, n, sys, i%97, n, strings.ToLower(v), n)
}

// sharedQueries are five of the shared requests, chosen by the tool's name.
func sharedQueries(name string) []string {
	h := fnv.New32a()
	h.Write([]byte(name))
	start := int(h.Sum32() % uint32(len(sharedRequests)))
	qs := make([]string, 5)
	for i := range qs {
		qs[i] = sharedRequests[(start+i*7)%len(sharedRequests)]
	}
	return qs
}

// sharedCatalog is a hybrid catalog of n shared tools with builtin vectors,
// as its document and raw vectors, and the query sets of the 200 tools a
// grading samples (every n/200th), their intents embedded.
func sharedCatalog(b testing.TB, n int) (*contract.Document, map[string][]byte, map[string]gradehook.QuerySet) {
	b.Helper()
	doc := &contract.Document{Version: 1, Catalog: "bench/shared", CatalogUID: "shared",
		Embedding: contract.EmbeddingInfo{Model: embedding.BuiltinLexicalModel, Dimensions: embedding.BuiltinLexicalDimensions},
		Search:    contract.SearchDefaults{Method: "hybrid", TopK: 5}}
	descriptions := make([]string, n)
	for i := range n {
		name, desc := sharedTool(i)
		descriptions[i] = desc
		t, err := contract.NormalizeTool(contract.Tool{Name: name, Description: desc, Parameters: []byte(
			`{"type":"object","properties":{"id":{"type":"string","description":"the record's id"},"limit":{"type":"integer","minimum":1,"maximum":100},"region":{"type":"string","enum":["eu","us","apac"]}},"required":["id"]}`)})
		if err != nil {
			b.Fatal(err)
		}
		doc.Tools = append(doc.Tools, t)
	}
	vecs, err := embedding.LexicalEmbedder{}.Embed(context.Background(), descriptions)
	if err != nil {
		b.Fatal(err)
	}
	raw := make(map[string][]byte, n)
	for i, v := range vecs {
		raw[doc.Tools[i].Name] = contract.EncodeVector(v)
	}
	slices.SortFunc(doc.Tools, contract.ByName)
	if err := doc.Seal(); err != nil {
		b.Fatal(err)
	}
	sets := map[string]gradehook.QuerySet{}
	for i := 0; i < n; i += max(1, n/200) {
		name, _ := sharedTool(i)
		qs := sharedQueries(name)
		set := gradehook.QuerySet{Queries: qs, Vectors: embedTexts(b, qs)}
		for j, q := range qs {
			if in := text.Intents(q); len(in) > 0 {
				if set.IntentVectors == nil {
					set.IntentVectors = map[int][][]float32{}
				}
				set.IntentVectors[j] = embedTexts(b, in)
			}
		}
		sets[name] = set
	}
	return doc, raw, sets
}

// embedTexts embeds texts with the builtin model.
func embedTexts(b testing.TB, texts []string) [][]float32 {
	vecs, err := embedding.LexicalEmbedder{}.Embed(context.Background(), texts)
	if err != nil {
		b.Fatal(err)
	}
	return vecs
}

// editShared is the version after doc in which tool edit's description
// ends in one more sentence, and its vector is the new text's.
func editShared(b testing.TB, doc *contract.Document, raw map[string][]byte, edit int) (*contract.Document, string) {
	b.Helper()
	name, _ := sharedTool(edit)
	return changeShared(b, doc, raw, map[string]string{name: ""}, func(d string) string { return d + " Also supports bulk mode." }), name
}

// changeShared is the version after doc in which each tool named in
// tools has its description made by describe from the one it had (or
// from the one tools gives, for a tool that comes) and the vector of the
// new text; describe returning "" removes the tool. raw is changed to
// the version's vectors.
func changeShared(b testing.TB, doc *contract.Document, raw map[string][]byte, tools map[string]string, describe func(string) string) *contract.Document {
	b.Helper()
	next := *doc
	next.Version++
	next.Tools = slices.Clone(doc.Tools)
	for name, desc := range tools {
		i, ok := slices.BinarySearchFunc(next.Tools, name, func(t contract.Tool, n string) int { return strings.Compare(t.Name, n) })
		t := contract.Tool{Name: name, Description: desc, Parameters: []byte(`{"type":"object"}`)}
		if ok {
			t = next.Tools[i]
		}
		t.Description = describe(t.Description)
		if t.Description == "" {
			next.Tools = slices.Delete(next.Tools, i, i+1)
			delete(raw, name)
			continue
		}
		t, err := contract.NormalizeTool(t)
		if err != nil {
			b.Fatal(err)
		}
		if ok {
			next.Tools[i] = t
		} else {
			next.Tools = slices.Insert(next.Tools, i, t)
		}
		raw[name] = contract.EncodeVector(embedTexts(b, []string{t.Description})[0])
	}
	if err := next.Seal(); err != nil {
		b.Fatal(err)
	}
	return &next
}

// BenchmarkGradeEdit grades the version after an edit of one tool's
// description in a catalog of the shared shape, from the grading of the
// version before, as the operator grades each version it publishes:
// searched/op is the queries the grade searched again of the 1,000 it
// grades.
func BenchmarkGradeEdit(b *testing.B) {
	for _, n := range []int{10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			ctx := context.Background()
			doc, raw, sets := sharedCatalog(b, n)
			read := func(names []string) (map[string]string, error) {
				out := make(map[string]string, len(names))
				for _, name := range names {
					out[name] = string(raw[name])
				}
				return out, nil
			}
			digest := func(name string) uint64 { return contract.VectorDigest(raw[name]) }
			g := gradehook.New(-1, 0)
			if err := g.Index(doc, 1000, digest, nil, read); err != nil {
				b.Fatal(err)
			}
			if _, _, err := g.Grade(ctx, sets); err != nil {
				b.Fatal(err)
			}
			searched, edit := 0, 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				var name string
				doc, name = editShared(b, doc, raw, edit*37%n)
				edit++
				b.StartTimer()
				if err := g.Index(doc, 1000, digest, []string{name}, read); err != nil {
					b.Fatal(err)
				}
				got, _, err := g.Grade(ctx, sets)
				if err != nil {
					b.Fatal(err)
				}
				searched += got.Searched
			}
			b.ReportMetric(float64(searched)/float64(b.N), "searched/op")
		})
	}
}
