// Package console serves the web console of kubectl toolcatalog console: a
// local server that reads the cluster with the user's own client and
// rights, and each catalog's Redis through the plugin's client code. It
// renders every page on the server; what the user may not read, the page
// says, with the API server's message.
package console

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

//go:embed style.css
var style []byte

// Server is the console's HTTP handler.
type Server struct {
	// Kube reads and writes the cluster as the user.
	Kube *kube.Client
	// Namespaces are those whose catalogs the console shows.
	Namespaces []string
	// Load reads a catalog's published version from its Redis.
	Load func(ctx context.Context, tc *v1alpha1.ToolCatalog) (*Published, error)
	// Redis calls read with a client of the catalog's Redis and the
	// catalog's keys, for what a page reads beside the published version
	// (retained versions, gradings, recorded requests).
	Redis func(ctx context.Context, tc *v1alpha1.ToolCatalog, read func(redis.UniversalClient, contract.Keys) error) error
	// Addr is the host:port the console serves on: a request naming
	// another host (a DNS-rebinding page) is refused.
	Addr string
	// token is the console's own, in every form it serves: a form posted
	// from anywhere else is refused.
	token string
}

// Published is a catalog's published version, as the plugin reads it.
type Published struct {
	Catalog *toolcatalog.Catalog
	// Embedder embeds queries with the catalog's model; nil when its
	// provider cannot be built (search falls back to BM25 and says so).
	Embedder toolcatalog.QueryEmbedder
	// MostUsed are the catalog's most used tools, when it includes them.
	MostUsed []string
}

// Handler routes the console's pages.
func (s *Server) Handler() http.Handler {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand never fails
	s.token = base64.RawURLEncoding.EncodeToString(b)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.catalogs)
	mux.HandleFunc("GET /catalogs/{namespace}/{name}", s.catalog)
	mux.HandleFunc("GET /catalogs/{namespace}/{name}/search", s.search)
	mux.HandleFunc("GET /catalogs/{namespace}/{name}/versions", s.versions)
	mux.HandleFunc("GET /catalogs/{namespace}/{name}/tools/{tool}", s.tool)
	mux.HandleFunc("GET /catalogs/{namespace}/{name}/map.svg", s.toolMap)
	mux.HandleFunc("GET /catalogs/{namespace}/{name}/quality.svg", s.qualityChart)
	mux.HandleFunc("GET /approvals", s.approvals)
	mux.HandleFunc("GET /sources/{namespace}/{name}", s.source)
	mux.HandleFunc("POST /sources/{namespace}/{name}/approve", s.approve)
	mux.HandleFunc("GET /style.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(style)
	})
	return s.secured(mux)
}

// secured refuses a request for another host than the console's own (a
// page on another site whose name was rebound to 127.0.0.1 would
// otherwise read the console with the user's rights), and sets the headers
// every page carries: no framing, no script or style from elsewhere, no
// sniffing. The console runs no script.
func (s *Server) secured(h http.Handler) http.Handler {
	_, port, _ := net.SplitHostPort(s.Addr)
	hosts := map[string]bool{s.Addr: true, "localhost:" + port: true, "127.0.0.1:" + port: true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts[r.Host] {
			http.Error(w, "this console answers only to "+s.Addr, http.StatusMisdirectedRequest)
			return
		}
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// catalogRow is one catalog on the catalogs page.
type catalogRow struct {
	Namespace, Name     string
	Ready, Reason       string
	Message             string
	Version             int64
	Tools, Embedded     int32
	Stale, Failed       int32
	SelfRecall          string
	Confusable, Pending int
	LastRefresh         string
	// Pinned says what a pinned catalog serves ("pinned to 3, 2 tools
	// changed since"); empty when it is not pinned.
	Pinned        string
	PinnedVersion int64
}

// denial is a namespace the user may not read, with the API server's
// message.
type denial struct{ Namespace, Message string }

func (s *Server) catalogs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	data := catalogsPage{Checked: s.Namespaces}
	for _, ns := range s.Namespaces {
		var list v1alpha1.ToolCatalogList
		if err := s.Kube.List(ctx, &list, ns, nil); err != nil {
			data.Denied = append(data.Denied, denial{ns, apiMessage(err)})
			continue
		}
		// Pending upstream changes, by the catalog whose selector takes
		// the source's labels; a user who may not read sources sees none.
		var sources v1alpha1.ToolSourceList
		_ = s.Kube.List(ctx, &sources, ns, nil)
		for _, tc := range list.Items {
			data.Rows = append(data.Rows, rowOf(&tc, sources.Items))
		}
	}
	slices.SortFunc(data.Rows, func(a, b catalogRow) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	render(w, data.node())
}

func rowOf(tc *v1alpha1.ToolCatalog, sources []v1alpha1.ToolSource) catalogRow {
	row := catalogRow{Namespace: tc.Namespace, Name: tc.Name, Ready: "Unknown", Version: tc.Status.Version}
	if c := meta.FindStatusCondition(tc.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		row.Ready, row.Reason, row.Message = string(c.Status), c.Reason, c.Message
	}
	if n := tc.Status.Counts; n != nil {
		row.Tools, row.Embedded, row.Stale, row.Failed = n.Tools, n.Embedded, n.Stale, n.Failed
	}
	if q := tc.Status.Quality; q != nil {
		row.SelfRecall, row.Confusable = q.SelfRecallAt5, len(q.ConfusablePairs)
	}
	if p := tc.Status.Pin; p != nil {
		row.Pinned, row.PinnedVersion = p.Summary, p.Version
	}
	if lr := tc.Status.LastRefresh; lr != nil {
		row.LastRefresh = string(lr.Result)
		if lr.Message != "" {
			row.LastRefresh += ": " + lr.Message
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(&tc.Spec.Selector); err == nil {
		for _, src := range sources {
			if sel.Matches(labels.Set(src.Spec.Labels)) {
				row.Pending += len(src.Status.PendingChanges)
			}
		}
	}
	return row
}

// catalogsPage lists the catalogs of the console's namespaces.
type catalogsPage struct {
	Rows    []catalogRow
	Denied  []denial
	Checked []string
}

// catalogPage is one catalog: its state, gradings, map and tools.
type catalogPage struct {
	Namespace, Name     string
	Row                 catalogRow
	Error               string
	Unpublished         string
	Version             int64
	Tools               []toolRow
	Toolsets, Sources   []string
	Query, Toolset, Src string
	Shown, Total        int
	Quality             *v1alpha1.CatalogQuality
	Gradings            []gradingRow
	GradingsError       string
}

type (
	gradingRow     = contract.Quality
	confusablePair = v1alpha1.ConfusablePair
	outrankedTool  = v1alpha1.OutrankedTool
)

// toolRow is one tool on a catalog's page.
type toolRow struct {
	Name, Description, Toolset, Source string
	Parameters                         []string
	AlwaysInclude                      bool
}

func (s *Server) catalog(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	data := catalogPage{Namespace: key.Namespace, Name: key.Name, Query: r.URL.Query().Get("q"), Toolset: r.URL.Query().Get("toolset"), Src: r.URL.Query().Get("source")}
	tc, pub, perr := s.open(ctx, key)
	if tc == nil {
		w.WriteHeader(perr.status)
		data.Error = perr.msg
		render(w, data.node())
		return
	}
	data.Row, data.Quality = rowOf(tc, nil), tc.Status.Quality
	switch {
	case perr != nil && perr.status == http.StatusOK:
		data.Unpublished = perr.msg
	case perr != nil:
		data.Error = perr.msg
	default:
		cat := pub.Catalog
		data.Version = cat.Version()
		toolsets, sources := map[string]bool{}, map[string]bool{}
		q := strings.ToLower(strings.TrimSpace(data.Query))
		for _, t := range cat.Tools() {
			toolsets[t.Toolset] = true
			src := ""
			if t.Source != nil {
				src = t.Source.ToolSource
			}
			sources[src] = true
			if data.Toolset != "" && t.Toolset != data.Toolset || data.Src != "" && src != data.Src ||
				q != "" && !strings.Contains(strings.ToLower(t.Name+" "+t.Description), q) {
				continue
			}
			data.Tools = append(data.Tools, toolRow{Name: t.Name, Description: t.Description, Toolset: t.Toolset, Source: src,
				Parameters: paramNames(t), AlwaysInclude: t.AlwaysInclude})
		}
		data.Shown, data.Total = len(data.Tools), len(cat.Tools())
		data.Toolsets, data.Sources = keys(toolsets), keys(sources)
		if qs, err := s.gradings(ctx, tc); err != nil {
			data.GradingsError = "Reading the gradings of the retained versions: " + err.Error()
		} else {
			slices.Reverse(qs) // newest first in the table
			data.Gradings = qs
		}
	}
	render(w, data.node())
}

func paramNames(t contract.Tool) []string { return contract.ParameterNames(t.Parameters) }

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// pageError is why a page cannot show a catalog's published version: the
// status to answer with (200 for a catalog not published yet) and what to
// tell the user.
type pageError struct {
	status int
	msg    string
}

// open reads a catalog as the user and then its published version; tc is
// nil when the catalog itself could not be read.
func (s *Server) open(ctx context.Context, key types.NamespacedName) (*v1alpha1.ToolCatalog, *Published, *pageError) {
	tc := &v1alpha1.ToolCatalog{}
	if err := s.Kube.Get(ctx, key, tc); err != nil {
		return nil, nil, &pageError{statusOf(err), apiMessage(err)}
	}
	pub, err := s.Load(ctx, tc)
	switch {
	case errors.Is(err, toolcatalog.ErrNotPublished):
		return tc, nil, &pageError{http.StatusOK, fmt.Sprintf("%s/%s has not published a version yet: see its Ready condition.", key.Namespace, key.Name)}
	case err != nil:
		return tc, nil, &pageError{http.StatusBadGateway, "Reading the published catalog: " + err.Error()}
	}
	return tc, pub, nil
}

// apiMessage is what the API server said, for the page.
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	return err.Error()
}

func statusOf(err error) int {
	var se apierrors.APIStatus
	if errors.As(err, &se) && se.Status().Code != 0 {
		return int(se.Status().Code)
	}
	return http.StatusBadGateway
}
