// Package shapes holds the catalog shapes the benchmarks and tests share.
//
// The shared shape is that of a large generated API surface: long
// descriptions from templates over verbs, nouns and systems, three
// parameters (one an undescribed enum), and generated requests drawn from
// a fixed 20, a third of them asking for two things, so that many tools
// share each request and its intents.
package shapes

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// The shared shape's words.
var (
	Verbs = []string{"Find", "Create", "Update", "Delete", "List", "Export", "Import", "Archive", "Restore", "Approve",
		"Reject", "Assign", "Close", "Reopen", "Merge", "Split", "Tag", "Sync", "Audit", "Summarize"}
	Nouns = []string{"invoice", "order", "ticket", "shipment", "account", "payment", "product", "subscription", "user", "contract",
		"lead", "campaign", "asset", "device", "incident", "project", "task", "vendor", "warehouse", "report",
		"meeting", "document", "expense", "refund", "deployment"}
	Systems = []string{"Salesforce", "Zendesk", "Jira", "SAP", "Workday", "HubSpot", "ServiceNow", "Stripe", "Shopify", "NetSuite",
		"GitHub", "Slack", "Confluence", "Asana", "Okta", "Datadog", "PagerDuty", "Intercom", "Xero", "Airtable"}
	// Requests are what a provider writes as any shared tool's requests;
	// some ask for two things, as people do.
	Requests = []string{"will it rain tomorrow in Paris", "scale the api deployment to 5 replicas and also check the error logs", "find the invoice for order 1234, then email it to the customer",
		"who owns the checkout service", "close all tickets older than 30 days. Then notify their owners", "export last month's expenses to a spreadsheet, then share it with finance",
		"what meetings do I have this afternoon", "refund the duplicate payment from yesterday and also tell the customer", "assign the outage incident to the on-call engineer",
		"list the deployments that failed today, then restart them", "summarize the contract with Acme", "approve the pending purchase orders",
		"sync the customer list with the CRM", "archive the projects finished last year", "restore the document I deleted",
		"tag the open leads from the campaign", "audit who changed the admin settings", "merge the duplicate accounts for Jane Doe",
		"update the shipping address on my order", "create a task to renew the subscription"}
)

// Words are shared tool i's verb, noun and system.
func Words(i int) (verb, noun, system string) {
	return Verbs[i%len(Verbs)], Nouns[i/len(Verbs)%len(Nouns)], Systems[i/(len(Verbs)*len(Nouns))%len(Systems)]
}

// Description is shared tool i's description.
func Description(i int) string {
	v, n, sys := Words(i)
	return fmt.Sprintf("%s %s records in %s for workspace %d. Accepts filters such as date range, owner and status, and returns matching %ss with ids, timestamps and links. Use when the user asks to %s a %s.",
		v, n, sys, i%97, n, strings.ToLower(v), n)
}

// Edit is what an edit of a shared tool appends to its description.
const Edit = " Also supports bulk mode."

// Queries are count of the Requests, chosen by seed (the prompt that asks
// for them, which holds the tool's description).
func Queries(seed string, count int) []string {
	h := fnv.New32a()
	h.Write([]byte(seed))
	start := int(h.Sum32() % uint32(len(Requests)))
	qs := make([]string, min(count, len(Requests)))
	for i := range qs {
		qs[i] = Requests[(start+i*7)%len(Requests)]
	}
	return qs
}

// Parameters are every shared tool's: an id and a limit, described, and a
// region enum, not.
const Parameters = `{"type":"object","properties":{"id":{"type":"string","description":"the record's id"},` +
	`"limit":{"type":"integer","minimum":1,"maximum":100,"description":"how many records to return"},` +
	`"region":{"type":"string","enum":["eu","us","apac"]}},"required":["id"]}`
