package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/toolcatalog/tool-catalog-operator/internal/versiondiff"
	g "maragu.dev/gomponents"
	h "maragu.dev/gomponents/html"
)

// The pages are built as trees of nodes (gomponents) that escape every
// text and attribute value, not with html/template: executing a template
// makes the linker keep every exported method of every type in the
// binary, about 18 MB of the plugin. Each page's URLs are built by path,
// which escapes each segment.

// render writes a page.
func render(w http.ResponseWriter, page g.Node) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := page.Render(w); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
	}
}

// layout is the frame of every page: its title, the console's navigation
// and the page's main content.
func layout(title string, main ...g.Node) g.Node {
	return h.Doctype(h.HTML(h.Lang("en"),
		h.Head(
			h.Meta(h.Charset("utf-8")),
			h.Meta(h.Name("viewport"), h.Content("width=device-width, initial-scale=1")),
			h.TitleEl(g.Text(title+" · tool catalogs")),
			h.Link(h.Rel("stylesheet"), h.Href("/style.css")),
			h.Link(h.Rel("icon"), h.Href("data:,")),
		),
		h.Body(
			h.A(h.Class("skip"), h.Href("#main"), g.Text("Skip to content")),
			h.Header(h.Nav(h.Aria("label", "Console"), h.A(h.Href("/"), g.Text("Catalogs")), g.Text(" "), h.A(h.Href("/approvals"), g.Text("Approvals")))),
			h.Main(h.ID("main"), g.Group(main)),
		),
	))
}

// path is a URL path of the console, each segment escaped.
func path(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

func text(format string, args ...any) g.Node { return g.Textf(format, args...) }

func alert(msg string) g.Node { return h.P(h.Class("denied"), h.Role("alert"), g.Text(msg)) }

func empty(children ...g.Node) g.Node { return h.P(h.Class("empty"), g.Group(children)) }

// head is a table's header row.
func head(cols ...string) g.Node {
	return h.THead(h.Tr(g.Map(cols, func(c string) g.Node { return h.Th(h.Scope("col"), g.Text(c)) })))
}

// cells is a table row of texts.
func cells(values ...string) g.Node {
	return h.Tr(g.Map(values, func(v string) g.Node { return h.Td(g.Text(v)) }))
}

// section is a titled section of a page.
func section(id, title string, children ...g.Node) g.Node {
	return h.Section(h.Aria("labelledby", id), h.H2(h.ID(id), g.Text(title)), g.Group(children))
}

// choice is a select of options, the one equal to chosen selected.
func choice(id, label, chosen string, options []string, first ...g.Node) g.Node {
	return g.Group{
		h.Label(h.For(id), g.Text(label)), g.Text(" "),
		h.Select(h.ID(id), h.Name(id), g.Group(first), g.Map(options, func(o string) g.Node {
			return h.Option(g.If(o == chosen, h.Selected()), g.Text(o))
		})),
	}
}

func utc(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

func deniedNamespaces(denied []denial, what string) g.Node {
	return g.Map(denied, func(d denial) g.Node {
		return h.P(h.Class("denied"), h.Role("alert"), g.Text("You may not list "+what+" in namespace "), h.Strong(g.Text(d.Namespace)), g.Text(": "+d.Message))
	})
}

func (p catalogsPage) node() g.Node {
	return layout("Catalogs",
		h.H1(g.Text("Catalogs")),
		deniedNamespaces(p.Denied, "ToolCatalogs"),
		g.If(len(p.Rows) > 0, h.Table(
			h.Caption(g.Text("ToolCatalogs in "+strings.Join(p.Checked, ", "))),
			head("Catalog", "Ready", "Version", "Tools", "Embedded", "Stale", "Failed", "Self-recall@5", "Confusable pairs", "Pending upstream changes", "Last refresh"),
			h.TBody(g.Map(p.Rows, func(r catalogRow) g.Node {
				ready := r.Ready
				if r.Reason != "" {
					ready += " (" + r.Reason + ")"
				}
				version := "none"
				if r.Version != 0 {
					version = strconv.FormatInt(r.Version, 10)
				}
				if r.Pinned != "" {
					version += " (" + r.Pinned + ")"
				}
				return h.Tr(
					h.Td(h.A(h.Href(path("catalogs", r.Namespace, r.Name)), g.Text(r.Namespace+"/"+r.Name))),
					h.Td(h.Class("ready-"+r.Ready), h.Title(r.Reason+": "+r.Message), g.Text(ready)),
					h.Td(g.Text(version)),
					h.Td(text("%d", r.Tools)), h.Td(text("%d", r.Embedded)), h.Td(text("%d", r.Stale)), h.Td(text("%d", r.Failed)),
					h.Td(g.Text(orText(r.SelfRecall, "not graded"))),
					h.Td(text("%d", r.Confusable)),
					h.Td(text("%d", r.Pending)),
					h.Td(g.Text(orText(r.LastRefresh, "none"))),
				)
			})),
		)),
		g.If(len(p.Rows) == 0 && len(p.Denied) == 0, empty(
			g.Text("No ToolCatalogs in "+strings.Join(p.Checked, ", ")+". Create one with "), h.Code(g.Text("kubectl apply -f")),
			g.Text("; see the samples in "), h.Code(g.Text("config/samples")), g.Text("."))),
	)
}

func (p catalogPage) node() g.Node {
	at := func(rest ...string) string {
		return path(append([]string{"catalogs", p.Namespace, p.Name}, rest...)...)
	}
	return layout(p.Namespace+"/"+p.Name,
		h.H1(g.Text("Catalog "+p.Namespace+"/"+p.Name)),
		g.If(p.Row.Ready != "", h.P(g.Text("Ready: "), h.Strong(h.Class("ready-"+p.Row.Ready), g.Text(p.Row.Ready)),
			g.If(p.Row.Reason != "", g.Text(" ("+p.Row.Reason+")")), g.If(p.Row.Message != "", g.Text(": "+p.Row.Message)))),
		g.Iff(p.Error != "", func() g.Node { return alert(p.Error) }),
		g.Iff(p.Error == "" && p.Unpublished != "", func() g.Node { return empty(g.Text(p.Unpublished)) }),
		g.Iff(p.Error == "" && p.Unpublished == "", func() g.Node { return p.published(at) }),
	)
}

func (p catalogPage) published(at func(...string) string) g.Node {
	return g.Group{
		h.P(h.A(h.Href(at("search")), g.Text("Search playground")), g.Text(" · "), h.A(h.Href(at("versions")), g.Text("Compare versions"))),
		h.P(text("Version %d · %d tools · self-recall@5 %s · %d confusable pairs", p.Version, p.Row.Tools, orText(p.Row.SelfRecall, "not graded"), p.Row.Confusable)),
		g.Iff(p.Row.Pinned != "", func() g.Node {
			return h.P(h.ID("pinned"), h.Role("status"), text("Consumers are served version %d (%s); version %d is the newest. ", p.Row.PinnedVersion, p.Row.Pinned, p.Row.Version),
				h.A(h.Href(at("versions")+fmt.Sprintf("?from=%d&to=%d", p.Row.PinnedVersion, p.Row.Version)), g.Text("Compare them")))
		}),
		section("quality", "Self-recall across versions", p.gradings(at)),
		g.Iff(p.Quality != nil && len(p.Quality.ConfusablePairs) > 0, func() g.Node {
			return section("confusable", "Confusable pairs", h.Ul(g.Map(p.Quality.ConfusablePairs, func(c confusablePair) g.Node {
				return h.Li(g.Text(strings.Join(c.Tools, " and ") + " (similarity " + c.Similarity + ")"))
			})))
		}),
		g.Iff(p.Quality != nil && len(p.Quality.Outranked) > 0, func() g.Node {
			q := p.Quality
			first := ""
			if int(q.OutrankedCount) > len(q.Outranked) {
				first = fmt.Sprintf(" (the first %d of %d)", len(q.Outranked), q.OutrankedCount)
			}
			return section("outranked", "Outranked tools",
				h.P(text("Tools that some of their own queries did not find in the top five, in version %d%s.", q.Version, first)),
				h.Table(head("Tool", "Queries missed", "Outranked by"), h.TBody(g.Map(q.Outranked, func(o outrankedTool) g.Node {
					return cells(o.Tool, fmt.Sprintf("%d of %d", o.Missed, o.Queries), o.By)
				}))))
		}),
		g.If(p.Total > 0, section("map", "Map of the tools",
			h.Img(h.Src(at("map.svg")), h.Width("864"), h.Height("576"), h.Alt("The tools drawn by their vectors' two principal components, a colour per toolset; confusable pairs are joined by a red line. The table below lists the same tools.")))),
		section("tools", "Tools", p.tools(at)),
	}
}

func (p catalogPage) gradings(at func(...string) string) g.Node {
	switch {
	case p.GradingsError != "":
		return alert(p.GradingsError)
	case len(p.Gradings) == 0:
		return empty(g.Text("No retained version has been graded yet: the operator grades a version once it is complete."))
	}
	return g.Group{
		h.Img(h.Src(at("quality.svg")), h.Width("768"), h.Height("336"), h.Alt("Self-recall@5 of each graded version, from 0 to 1. The table below gives the same figures.")),
		h.Table(h.Caption(g.Text("Gradings of the retained versions, newest first")),
			head("Version", "Self-recall@5", "Graded tools", "Graded queries", "Outranked tools", "Confusable pairs", "Graded"),
			h.TBody(g.Map(p.Gradings, func(q gradingRow) g.Node {
				return cells(strconv.FormatInt(q.Version, 10), fmt.Sprintf("%.3f", q.SelfRecallAt5), strconv.Itoa(q.GradedTools), strconv.Itoa(q.GradedQueries),
					strconv.Itoa(q.Outranked), strconv.Itoa(q.Confusable), utc(q.Graded))
			}))),
	}
}

func (p catalogPage) tools(at func(...string) string) g.Node {
	var list g.Node
	switch {
	case len(p.Tools) > 0:
		list = h.Table(head("Tool", "Description", "Toolset", "Source", "Parameters"), h.TBody(g.Map(p.Tools, func(t toolRow) g.Node {
			return h.Tr(
				h.Td(h.A(h.Href(at("tools", t.Name)), g.Text(t.Name)), g.If(t.AlwaysInclude, g.Group{g.Text(" "), h.Span(h.Class("tag"), g.Text("always included"))})),
				h.Td(g.Text(t.Description)), h.Td(g.Text(t.Toolset)), h.Td(g.Text(t.Source)), h.Td(g.Text(strings.Join(t.Parameters, ", "))),
			)
		})))
	case p.Total > 0:
		list = empty(g.Text("No tool matches."))
	default:
		list = empty(text("Version %d holds no tools: the catalog's selector matches no ToolDefinition, or none could be embedded (see the catalog's Ready condition and ", p.Version),
			h.Code(g.Text("kubectl describe")), g.Text(")."))
	}
	any := h.Option(h.Value(""), g.Text("any"))
	return g.Group{
		h.Form(h.Method("get"), h.Role("search"),
			h.Label(h.For("q"), g.Text("Name or description")), g.Text(" "), h.Input(h.ID("q"), h.Name("q"), h.Value(p.Query)), g.Text(" "),
			choice("toolset", "Toolset", p.Toolset, p.Toolsets, any), g.Text(" "),
			choice("source", "Source", p.Src, p.Sources, any), g.Text(" "),
			h.Button(h.Type("submit"), g.Text("Filter")),
		),
		h.P(text("%d shown.", p.Shown)),
		list,
	}
}

func (p toolPage) node() g.Node {
	return layout(p.Tool,
		h.H1(g.Text("Tool "+p.Tool)),
		h.P(h.A(h.Href(path("catalogs", p.Namespace, p.Name)), g.Text("Back to "+p.Namespace+"/"+p.Name))),
		g.If(p.Error != "", alert(p.Error)),
		g.Iff(p.Entry != nil, p.entry),
		g.If(p.MetadataError != "", alert(p.MetadataError)),
		g.Iff(p.Metadata != nil, p.metadata),
		section("definition", "ToolDefinition", p.definition()),
	)
}

func (p toolPage) entry() g.Node {
	t := p.Entry
	var details g.Group
	if t.Toolset != "" {
		details = append(details, h.Dt(g.Text("Toolset")), h.Dd(g.Text(t.Toolset)))
	}
	if a := t.Annotations; a != nil {
		var hints []string
		if a.Title != "" {
			hints = append(hints, "title “"+a.Title+"”")
		}
		for _, hint := range []struct {
			name string
			v    *bool
		}{{"readOnlyHint", a.ReadOnlyHint}, {"destructiveHint", a.DestructiveHint}, {"idempotentHint", a.IdempotentHint}, {"openWorldHint", a.OpenWorldHint}} {
			if hint.v != nil {
				hints = append(hints, hint.name+" "+strconv.FormatBool(*hint.v))
			}
		}
		details = append(details, h.Dt(g.Text("Annotations")), h.Dd(g.Text(strings.Join(hints, " "))))
	}
	if s := t.Source; s != nil {
		details = append(details, h.Dt(g.Text("Source")), h.Dd(g.Text("ToolSource "+s.ToolSource+", upstream tool "+s.Tool)))
	}
	details = append(details, h.Dt(g.Text("Spec hash")), h.Dd(h.Code(g.Text(t.SpecHash))))
	return section("published", "As published",
		h.P(g.Text(t.Description)),
		h.Dl(details),
		h.H3(g.Text("Parameters")),
		h.Pre(h.Class("diff"), g.Text(p.Parameters)),
	)
}

func (p toolPage) metadata() g.Node {
	m := p.Metadata
	var requests g.Node
	if len(p.Learned) > 0 {
		requests = g.Group{
			h.Table(h.Caption(g.Text("Requests that led to calls of this tool, folded into its vector")),
				head("Request", "Distinct principals who made it"),
				h.TBody(g.Map(p.Learned, func(l learned) g.Node {
					who := "no longer recorded"
					if l.Principals > 0 {
						who = strconv.Itoa(l.Principals)
					}
					return cells(l.Request, who)
				}))),
		}
	} else {
		requests = empty(g.Text("None: the catalog learns requests only with "), h.Code(g.Text("spec.learning.enabled")), g.Text(", from enough distinct principals."))
	}
	return section("queries", "What its vector was built from",
		h.P(text("Model %s, %d dimensions, embedded %s.", m.Model, m.Dimensions, utc(m.EmbeddedAt))),
		h.H3(g.Text("Synthetic and example queries")), h.Ul(g.Map(m.SyntheticQueries, func(q string) g.Node { return h.Li(g.Text(q)) })),
		h.H3(g.Text("Learned requests")), requests,
	)
}

func (p toolPage) definition() g.Node {
	switch {
	case p.DefinitionError != "":
		return alert("You may not list ToolDefinitions in " + p.Namespace + ": " + p.DefinitionError)
	case p.Definition == "":
		return empty(g.Text("No ToolDefinition in " + p.Namespace + " names this tool."))
	}
	return g.Group{
		h.P(g.Text(p.Namespace + "/" + p.Definition)),
		h.Table(h.Caption(g.Text("Embedding records")), head("Catalog", "Version", "Model", "Queries", "Embedded", "Reason"),
			h.TBody(g.Map(p.Records, func(r recordRow) g.Node {
				embedded := ""
				if r.EmbeddedTime != nil {
					embedded = utc(r.EmbeddedTime.Time)
				}
				reason := r.Reason
				if r.Message != "" {
					reason += ": " + r.Message
				}
				return cells(r.Catalog, strconv.FormatInt(r.CatalogVersion, 10), r.Model, strconv.Itoa(int(r.QueryCount)), embedded, reason)
			}))),
		h.Table(h.Caption(g.Text("Conditions")), head("Type", "Status", "Reason", "Message"),
			h.TBody(g.Map(p.Conditions, func(c conditionRow) g.Node {
				return h.Tr(h.Td(g.Text(c.Type)), h.Td(h.Class("ready-"+string(c.Status)), g.Text(string(c.Status))), h.Td(g.Text(c.Reason)), h.Td(g.Text(c.Message)))
			}))),
	}
}

func (p searchPage) node() g.Node {
	methods := make([]string, len(p.Methods))
	for i, m := range p.Methods {
		methods[i] = string(m)
	}
	topK := ""
	if p.TopK != 0 {
		topK = strconv.Itoa(p.TopK)
	}
	return layout("Search "+p.Namespace+"/"+p.Name,
		h.H1(g.Text("Search "+p.Namespace+"/"+p.Name)),
		h.P(h.A(h.Href(path("catalogs", p.Namespace, p.Name)), g.Text("Back to the catalog"))),
		h.Form(h.Method("get"), h.Role("search"),
			h.Label(h.For("q"), g.Text("Request")), g.Text(" "), h.Input(h.ID("q"), h.Name("q"), g.Attr("size", "70"), h.Value(p.Query)), g.Text(" "),
			choice("method", "Method", p.Method, methods, h.Option(h.Value(""), g.Text("the catalog's"))), g.Text(" "),
			h.Label(h.For("k"), g.Text("Top k")), g.Text(" "), h.Input(h.ID("k"), h.Name("k"), h.Type("number"), h.Min("1"), h.Max("50"), h.Value(topK)), g.Text(" "),
			h.Button(h.Type("submit"), g.Text("Search")),
		),
		g.If(p.Error != "", alert(p.Error)),
		g.Iff(p.Resp != nil, p.results),
	)
}

func (p searchPage) results() g.Node {
	r := p.Resp
	return g.Group{
		section("explain", "How it ranked",
			h.P(text("Version %d, method %s.", p.Version, r.Method)),
			g.If(r.Fallback != "", h.P(h.Class("denied"), g.Text("Semantic ranking not used: "+r.Fallback))),
			blend(r.Blend),
			g.If(len(r.Intents) > 0, g.Group{
				h.P(text("%d intents, each searched on its own and given its share of the results:", len(r.Intents))),
				h.Ol(h.Class("intents"), g.Map(r.Intents, func(in intent) g.Node { return h.Li(g.Text("“"+in.Text+"” "), blend(in.Blend)) })),
			}),
		),
		section("results", "Results",
			h.Table(head("Rank", "Tool", "Why", "Score", "Semantic", "BM25"), h.TBody(g.Map(p.Hits, func(x hit) g.Node {
				why := x.Why
				if x.Intent != 0 {
					why = fmt.Sprintf("intent %d", x.Intent)
				}
				return h.Tr(
					h.Td(text("%d", x.Rank)), h.Td(h.Strong(g.Text(x.Name)), h.Br(), h.Small(g.Text(x.Description))),
					h.Td(h.Class("why"), g.Text(why)), h.Td(text("%.4f", x.Score)),
					h.Td(meter(x.Semantic)), h.Td(meter(x.BM25)),
				)
			}))),
			g.If(len(p.Hits) == 0, empty(g.Text("No tool matches."))),
		),
	}
}

// blend says how the arms were blended, or that the semantic-only rule
// fired.
func blend(b blendInfo) g.Node {
	switch {
	case b.SemanticOnly:
		return h.Span(h.Class("rule"), text("semantic-only rule fired: lexical evidence %.2f < %.2f; ranked by cosine alone", b.LexicalEvidence, b.MinLexicalEvidence))
	case b.MinLexicalEvidence != 0:
		return h.Span(h.Class("rule"), text("blend %.2f·cosine + %.2f·bm25; lexical evidence %.2f", b.SemanticWeight, 1-b.SemanticWeight, b.LexicalEvidence))
	}
	return nil
}

// meter is an arm's score as a bar, with its rank.
func meter(b *bar) g.Node {
	if b == nil {
		return g.Text("–")
	}
	return g.Group{
		h.Meter(h.Min("0"), h.Max("1"), h.Value(fmt.Sprintf("%.3f", b.Share)), h.Aria("label", fmt.Sprintf("score %.4f, rank %d", b.Score, b.Rank)), text("%.4f", b.Score)),
		text(" %.4f (#%d)", b.Score, b.Rank),
	}
}

func (p versionsPage) node() g.Node {
	return layout("Versions of "+p.Namespace+"/"+p.Name,
		h.H1(g.Text("Versions of "+p.Namespace+"/"+p.Name)),
		h.P(h.A(h.Href(path("catalogs", p.Namespace, p.Name)), g.Text("Back to the catalog"))),
		g.If(p.Error != "", alert(p.Error)),
		g.Iff(p.Error == "", p.comparison),
	)
}

func (p versionsPage) comparison() g.Node {
	pick := func(id, label string, chosen int64) g.Node {
		return g.Group{h.Label(h.For(id), g.Text(label)), g.Text(" "), h.Select(h.ID(id), h.Name(id), g.Map(p.Versions, func(d versionDoc) g.Node {
			v := strconv.FormatInt(d.Version, 10)
			return h.Option(h.Value(v), g.If(d.Version == chosen, h.Selected()), text("%s (%d tools)", v, len(d.Tools)))
		}))}
	}
	names := func(title string, list []string) g.Node {
		return g.If(len(list) > 0, g.Group{h.H3(g.Text(title)), h.Ul(g.Map(list, func(n string) g.Node { return h.Li(g.Text(n)) }))})
	}
	return g.Group{
		h.Form(h.Method("get"), pick("from", "From version", p.From), g.Text(" "), pick("to", "to version", p.To), g.Text(" "), h.Button(h.Type("submit"), g.Text("Compare"))),
		g.If(p.From == p.To, empty(g.Text("Only one version is retained, or the same version is chosen twice: nothing to compare."))),
		section("summary", fmt.Sprintf("From %d to %d", p.From, p.To),
			h.P(text("%d added · %d removed · %d changed · %d unchanged", len(p.Added), len(p.Removed), len(p.Changed), p.Same)),
			names("Added", p.Added), names("Removed", p.Removed),
			g.Map(p.Changed, func(c versiondiff.Change) g.Node {
				return h.Article(h.Class("change"), h.H3(g.Text(c.Name)),
					g.If(c.ToDesc != "", g.Group{h.P(h.Class("del"), g.Text("− "+c.FromDescription)), h.P(h.Class("ins"), g.Text("+ "+c.ToDesc))}),
					g.If(c.ParametersDiff != "", h.Pre(h.Class("diff"), g.Text(c.ParametersDiff))),
					g.If(len(c.Other) > 0, h.P(g.Text("Also changed: "+strings.Join(c.Other, ", ")))),
				)
			}),
		),
	}
}

func (p approvalsPage) node() g.Node {
	var sources g.Node
	if len(p.Sources) > 0 {
		sources = g.Map(p.Sources, func(src pendingSource) g.Node {
			id := "src-" + src.Namespace + "-" + src.Name
			return h.Section(h.Aria("labelledby", id), h.H2(h.ID(id), h.A(h.Href(path("sources", src.Namespace, src.Name)), g.Text("ToolSource "+src.Namespace+"/"+src.Name))),
				g.Map(src.Changes, func(c pendingChange) g.Node {
					since := ""
					if c.Since != "" {
						since = ", since " + c.Since
					}
					return h.Article(h.Class("change"),
						h.H3(g.Text(c.Tool+" "), h.Small(g.Text("("+c.Change+", spec hash "+c.Short+since+")"))),
						h.P(g.Text(c.Summary)),
						h.Pre(h.Class("diff"), g.Text(orText(c.Diff, "(no diff recorded: the source has not synced since it began recording them)"))),
						h.Form(h.Method("post"), h.Action(path("sources", src.Namespace, src.Name, "approve")),
							h.Input(h.Type("hidden"), h.Name("token"), h.Value(p.Token)),
							h.Input(h.Type("hidden"), h.Name("tool"), h.Value(c.Tool)),
							h.Input(h.Type("hidden"), h.Name("hash"), h.Value(c.SpecHash)),
							h.Button(h.Type("submit"), h.Aria("label", "Approve "+c.Tool+" at spec hash "+c.Short), g.Text("Approve "+c.Tool)),
						),
					)
				}))
		})
	} else if len(p.Denied) == 0 {
		sources = empty(g.Text("No ToolSource in "+strings.Join(p.Checked, ", ")+" holds a change for approval (a source holds them with "),
			h.Code(g.Text("changePolicy: RequireApproval")), g.Text(")."))
	}
	return layout("Approvals",
		h.H1(g.Text("Upstream changes awaiting approval")),
		g.If(p.Approved != "", h.P(h.Class("done"), h.Role("status"), g.Text("Approved "+p.Approved+". The ToolSource applies it at its next sync."))),
		g.If(p.Failed != "", alert(p.Failed)),
		deniedNamespaces(p.Denied, "ToolSources"),
		sources,
	)
}
