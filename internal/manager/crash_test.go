package manager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/openaitest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

var countLine = regexp.MustCompile(`Write (\d+) distinct user requests`)

// managerProcess is cmd/manager running as its own process, to be killed.
type managerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startManagerProcess(t *testing.T, bin, kubeconfigPath string) *managerProcess {
	t.Helper()
	// The provider answers on loopback.
	cmd := exec.Command(bin, "--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=error", "--egress-allow=127.0.0.1/32")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfigPath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &managerProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.done) }()
	t.Cleanup(m.kill)
	return m
}

func (m *managerProcess) kill() {
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
}

// The manager killed with SIGKILL in the middle of a pass, while it
// generates queries and right after it wrote a version: after a restart no
// tool is lost, identical content makes no second version, and the refresh
// request pending at the kill is still carried out.
func TestManagerKilledMidPass(t *testing.T) {
	shared.Use(t)
	const tools = 40
	ctx := context.Background()
	dir := t.TempDir()
	bin := testenv.Build(t, "../../cmd/manager")
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	// The provider can hold chat requests, to catch the manager while it
	// generates. Queries depend on the prompt only: a forced refresh of an
	// unchanged tool produces identical content.
	p := openaitest.New(t)
	var mu sync.Mutex
	var hold chan struct{}
	generating := make(chan struct{}, 1)
	p.Hold = func() {
		mu.Lock()
		h := hold
		mu.Unlock()
		if h != nil {
			select {
			case generating <- struct{}{}:
			default:
			}
			<-h
		}
	}
	p.OnChat = func(w http.ResponseWriter, _ *http.Request, _ int, req openaitest.ChatRequest) {
		prompt := req.Messages[len(req.Messages)-1].Content
		n, _ := strconv.Atoi(countLine.FindStringSubmatch(prompt)[1])
		sum := sha256.Sum256([]byte(prompt))
		qs := make([]string, n)
		for i := range qs {
			qs[i] = fmt.Sprintf("request %d about %s", i+1, hex.EncodeToString(sum[:4]))
		}
		openaitest.WriteChat(w, req.Model, openaitest.QueriesJSON(qs...))
	}

	ns := testenv.Namespace(t, kube, "crash-")
	channel := "crash:" + ns
	for i := range tools {
		td := &v1alpha1.ToolDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tool-%02d", i), Labels: map[string]string{"c": "crash"}},
			Spec: v1alpha1.ToolDefinitionSpec{Name: fmt.Sprintf("tool_%02d", i), Description: fmt.Sprintf("Tool number %d.", i)}}
		if err := kube.Create(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	tc := &v1alpha1.ToolCatalog{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tools"}, Spec: v1alpha1.ToolCatalogSpec{
		Selector:        metav1.LabelSelector{MatchLabels: map[string]string{"c": "crash"}},
		Redis:           v1alpha1.RedisSpec{Addresses: []string{redisSrv.Addr}},
		Embedding:       v1alpha1.EmbeddingSpec{Provider: v1alpha1.ProviderOpenAI, Model: "text-embedding-3-small", BaseURL: p.BaseURL()},
		QueryGeneration: v1alpha1.QueryGenerationSpec{Provider: v1alpha1.ProviderOpenAI, Models: []string{"gpt-4o-mini"}, BaseURL: p.BaseURL(), QueriesPerTool: 3},
		Publish:         v1alpha1.PublishSpec{Channel: channel},
	}}
	if err := kube.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	rc := redisSrv.Client()
	defer rc.Close()
	k := toolcatalog.Keys(ns, "tools")
	getTC := func() *v1alpha1.ToolCatalog {
		got := &v1alpha1.ToolCatalog{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(tc), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	request := func(token string) {
		cur := getTC()
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Annotations = map[string]string{v1alpha1.AnnotationRefreshRequestedAt: token, v1alpha1.AnnotationRefreshMode: "force"}
		if err := kube.Patch(ctx, cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	whole := func() *toolcatalog.Catalog {
		cat, err := toolcatalog.Load(ctx, rc, k)
		if err != nil || len(cat.Document.Tools) != tools || len(cat.Vectors) != tools {
			t.Fatalf("catalog after the kill: %v", err)
		}
		return cat
	}

	m := startManagerProcess(t, bin, kc)
	waitFor(t, "version 1 with every tool", 60*time.Second, func() bool {
		c := getTC()
		return c.Status.Counts != nil && c.Status.Counts.Embedded == tools && c.Status.Version >= 1
	})
	first := whole()

	// 1. Killed while generating: nothing was written, and the restarted
	// manager still carries out the forced refresh.
	mu.Lock()
	hold = make(chan struct{})
	mu.Unlock()
	request("during-generation")
	<-generating
	m.kill()
	mu.Lock()
	close(hold)
	hold = nil
	mu.Unlock()
	if got := whole(); got.Version() != first.Version() || getTC().Status.LastHandledRefreshAt == "during-generation" {
		t.Fatalf("a killed pass wrote version %d or used up the request", got.Version())
	}
	chatBefore := len(p.ChatRequests())
	startManagerProcess(t, bin, kc)
	waitFor(t, "the pending refresh after the restart", 60*time.Second, func() bool {
		return getTC().Status.LastHandledRefreshAt == "during-generation"
	})
	if n := len(p.ChatRequests()) - chatBefore; n < tools {
		t.Fatalf("the forced refresh after the restart generated for %d tools, want %d", n, tools)
	}
	afterForce := whole()
	t.Logf("killed during generation: version %d before, %d after the restarted manager handled the request (%d chat requests)",
		first.Version(), afterForce.Version(), len(p.ChatRequests())-chatBefore)

	// 2. Killed right after a write (its notice), before its status: the
	// restarted manager handles the request again, finds identical
	// content and makes no second version.
	sub := rc.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	tdObj := &v1alpha1.ToolDefinition{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: "tool-00"}, tdObj); err != nil {
		t.Fatal(err)
	}
	edit := client.MergeFrom(tdObj.DeepCopy())
	tdObj.Spec.Description = "Tool number 0, edited."
	if err := kube.Patch(ctx, tdObj, edit); err != nil {
		t.Fatal(err)
	}
	request("during-write")
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.kill()
	written := whole()
	t.Logf("killed after the notice %s: version %d in Redis, status version %d", msg.Payload, written.Version(), getTC().Status.Version)
	startManagerProcess(t, bin, kc)
	waitFor(t, "the request handled after the restart", 60*time.Second, func() bool {
		c := getTC()
		return c.Status.LastHandledRefreshAt == "during-write" && c.Status.Version >= written.Version()
	})
	final := whole()
	edited, _ := final.Tool("tool_00")
	if edited.Description != "Tool number 0, edited." {
		t.Fatalf("the edit is lost: %q", edited.Description)
	}
	t.Logf("after the restart: version %d (%d new versions for identical content)", final.Version(), final.Version()-written.Version())
	if final.Version() != written.Version() {
		t.Fatalf("identical content was published again as version %d after version %d", final.Version(), written.Version())
	}
}
