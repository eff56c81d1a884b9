package plugin

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testenv"
)

// lineWriter passes what a command prints to a channel, a write at a time.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// startConsole runs kubectl toolcatalog console --no-browser until the test
// ends and returns its URL.
func startConsole(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(lineWriter, 16)
	cmd := NewCommand(&Options{Out: out, Err: out, RESTConfig: cfg})
	cmd.SetArgs(append([]string{"-n", ns, "console", "--no-browser"}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v", err)
		}
	})
	url := regexp.MustCompile(`http://127\.0\.0\.1:\d+/`)
	for {
		select {
		case line := <-out:
			if u := url.FindString(line); u != "" {
				return u
			}
			t.Logf("console: %s", line)
		case err := <-done:
			t.Fatalf("the console stopped: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the console printed no URL within 30s")
		}
	}
}

// browser is a headless Chromium tab that fails the test on any script
// exception or error the page logs (a stylesheet the policy refused, say).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run hack/prereqs.sh (make test does), or apt-get install chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	var errs []string
	done := make(chan struct{})
	messages := chromedp.Console(ctx)
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || m.Type == "error" {
				errs = append(errs, m.String()+" at "+m.URL)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		acancel()
		<-done
		for _, e := range errs {
			t.Errorf("the browser reported: %s", e)
		}
	})
	return ctx
}

// screenshot keeps the page's image in $CONSOLE_SCREENSHOTS, when set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// text is the text of the page's main element.
func text(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// The catalogs page lists the catalog with its state, and the catalog's
// page its published tools, filtered by a search; pages load in Chromium
// without errors and are reachable by keyboard.
func TestConsoleCatalogPages(t *testing.T) {
	base := startConsole(t)
	ctx := browser(t)
	do(t, ctx, chromedp.Navigate(base))
	catalogs := text(t, ctx)
	screenshot(t, ctx, "catalogs")
	for _, want := range []string{ns + "/assistant", "True", "Self-recall@5", "Pending upstream changes"} {
		if !strings.Contains(catalogs, want) {
			t.Errorf("the catalogs page lacks %q:\n%s", want, catalogs)
		}
	}
	do(t, ctx, chromedp.KeyEvent("\t"))
	if focused, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement.textContent`)); err != nil || focused != "Skip to content" {
		t.Errorf("the first Tab focuses %q (%v), want the skip link", focused, err)
	}

	do(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/catalogs/`+ns+`/assistant"]`)), chromedp.WaitVisible(chromedp.CSS(`#tools`)))
	catalog := text(t, ctx)
	screenshot(t, ctx, "catalog")
	for _, want := range []string{"Version 1", "get_weather", "send_email", "run_sql", "4 shown"} {
		if !strings.Contains(catalog, want) {
			t.Errorf("the catalog page lacks %q:\n%s", want, catalog)
		}
	}
	do(t, ctx, chromedp.SetValue(chromedp.CSS(`#q`), "weather"), chromedp.Submit(chromedp.CSS(`#q`)), chromedp.WaitVisible(chromedp.CSS(`#tools`)))
	if filtered := text(t, ctx); !strings.Contains(filtered, "get_weather") || strings.Contains(filtered, "send_email") || !strings.Contains(filtered, "1 shown") {
		t.Errorf("filtered by weather:\n%s", filtered)
	}

	// The search playground: a request of two intents, each arm's score
	// and rank as a bar, the intents and their blends.
	do(t, ctx, chromedp.Click(chromedp.CSS(`a[href$="/search"]`)), chromedp.WaitVisible(chromedp.CSS(`#q`)),
		chromedp.SetValue(chromedp.CSS(`#q`), "Send an email to my manager about the outage. Then tell me the weather forecast for Paris."),
		chromedp.Submit(chromedp.CSS(`#q`)), chromedp.WaitVisible(chromedp.CSS(`#results`)))
	found := text(t, ctx)
	screenshot(t, ctx, "search")
	for _, want := range []string{"method hybrid", "2 intents", "“Send an email to my manager about the outage”", "blend 0.", "send_email", "intent 1", "get_weather", "intent 2"} {
		if !strings.Contains(found, want) {
			t.Errorf("the search page lacks %q:\n%s", want, found)
		}
	}
	meters, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("meter").length`))
	if err != nil || meters < 4 {
		t.Errorf("%d score bars (%v), want one per arm of each ranked tool", meters, err)
	}
}

// A page that names the catalog is refused to anyone asking for another
// host name: a site whose name was rebound to 127.0.0.1 cannot read the
// console with the user's rights.
func TestConsoleRefusesOtherHosts(t *testing.T) {
	base := startConsole(t)
	for host, want := range map[string]int{"evil.example": http.StatusMisdirectedRequest, "": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, base, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: status %d, want %d", cmpOr(host, "the console's own"), resp.StatusCode, want)
		}
	}
	if _, err := kubectlToolcatalog(t, "console", "--no-browser", "--address", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("--address 0.0.0.0:0: %v", err)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return fmt.Sprint(b)
}

// After an edit, the versions page shows what the new version changed:
// the description before and after, and a diff of the parameters.
func TestConsoleComparesVersions(t *testing.T) {
	ctx := context.Background()
	label := map[string]string{"catalog": "changing"}
	weather := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cv-weather", Labels: label},
		Spec: v1alpha1.ToolDefinitionSpec{Name: "get_weather", Description: "Get the current weather for a city."}}
	email := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cv-email", Labels: label},
		Spec: v1alpha1.ToolDefinitionSpec{Name: "send_email", Description: "Send an email message to a recipient."}}
	tc := &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "changing"}, Spec: v1alpha1.ToolCatalogSpec{
		Selector: metav1.LabelSelector{MatchLabels: label}, Redis: v1alpha1.RedisSpec{Addresses: []string{redisSrv.Addr}}}}
	for _, o := range []client.Object{weather, email, tc} {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	version := func() int64 {
		got := &v1alpha1.ToolCatalog{}
		if kube.Get(ctx, client.ObjectKeyFromObject(tc), got) != nil {
			return 0
		}
		return got.Status.Version
	}
	testenv.WaitFor(t, "version 1 of the catalog", 60*time.Second, func() bool { return version() == 1 })
	patch := client.MergeFrom(weather.DeepCopy())
	weather.Spec.Description = "Get the current weather and a five-day forecast for a city."
	weather.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`{"type":"object","properties":{"city":{"type":"string","description":"The city"}},"required":["city"]}`)}
	if err := kube.Patch(ctx, weather, patch); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "version 2 of the catalog", 60*time.Second, func() bool { return version() == 2 })

	base := startConsole(t)
	bctx := browser(t)
	do(t, bctx, chromedp.Navigate(base+"catalogs/"+ns+"/changing"), chromedp.Click(chromedp.CSS(`a[href$="/versions"]`)), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	page := text(t, bctx)
	screenshot(t, bctx, "versions")
	for _, want := range []string{"From 1 to 2", "0 added · 0 removed · 1 changed · 1 unchanged", "get_weather",
		"− Get the current weather for a city.", "+ Get the current weather and a five-day forecast for a city.", `+  "required": [`, `"city": {`} {
		if !strings.Contains(page, want) {
			t.Errorf("the versions page lacks %q:\n%s", want, page)
		}
	}
	// Compared the other way, by choosing the versions.
	do(t, bctx, chromedp.SetValue(chromedp.CSS(`#from`), "2"), chromedp.SetValue(chromedp.CSS(`#to`), "1"),
		chromedp.Submit(chromedp.CSS(`#from`)), chromedp.WaitVisible(chromedp.CSS(`#summary`)))
	if page := text(t, bctx); !strings.Contains(page, "From 2 to 1") || !strings.Contains(page, "+ Get the current weather for a city.") {
		t.Errorf("versions 2 to 1:\n%s", page)
	}
}
