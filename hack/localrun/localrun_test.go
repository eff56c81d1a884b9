package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

// localRun is one run of what `make run` runs on a machine without a
// cluster, as a separate process whose output goes through tee, the way
// `make run | tee run.log` does.
type localRun struct {
	cmd, tee *exec.Cmd
	stderr   bytes.Buffer
	lines    chan string
	screen   []string
}

// startLocalRun builds localrun and the kubectl plugin (as `make run` does)
// and starts localrun with a state directory of its own.
func startLocalRun(t *testing.T) *localRun {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal(testenv.AssetsHint)
	}
	dir := t.TempDir()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	bin := filepath.Join(dir, "localrun")
	for _, b := range [][]string{{"-o", bin, "."}, {"-o", filepath.Join(root, "bin", "kubectl-toolcatalog"), "../../cmd/kubectl-toolcatalog"}} {
		if out, err := exec.Command("go", append([]string{"build"}, b...)...).CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", b, err, out)
		}
	}
	r := &localRun{lines: make(chan string, 100)}
	r.cmd = exec.Command(bin, "-state-dir", filepath.Join(dir, "state"), "-root", root)
	r.cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "no-such-kubeconfig"))
	r.cmd.Stderr = &r.stderr
	r.tee = exec.Command("tee", filepath.Join(dir, "run.log"))
	pipe, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.tee.Stdin = pipe
	out, err := r.tee.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := r.tee.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		_ = r.tee.Process.Kill()
		_ = r.tee.Wait()
	})
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	return r
}

// waitForMatch reads output until a line matches re, and returns the
// submatches.
func (r *localRun) waitForMatch(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(120 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("localrun's output ended before %q:\n%s\n%s", re, strings.Join(r.screen, "\n"), r.stderr.String())
			}
			r.screen = append(r.screen, l)
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q within 120s:\n%s\n%s", re, strings.Join(r.screen, "\n"), r.stderr.String())
		}
	}
}

// children returns the processes localrun started, by command name.
func (r *localRun) children(t *testing.T) map[string]int {
	t.Helper()
	kids := map[string]int{}
	for _, pid := range childrenOf(r.cmd.Process.Pid) {
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err == nil {
			kids[strings.TrimSpace(string(comm))] = pid
		}
	}
	for _, name := range []string{"etcd", "kube-apiserver", "redis-server"} {
		if kids[name] == 0 {
			t.Fatalf("localrun should have started %s; its children are %v", name, kids)
		}
	}
	return kids
}

// TestEmbeddedModeStartsPublishesAndStopsCleanly runs what `make run` runs,
// piped through tee, runs the commands it prints as a user would paste
// them, then presses Ctrl-C the way a terminal does: tee dies first, so
// localrun's stdout is a closed pipe while it shuts down.
func TestEmbeddedModeStartsPublishesAndStopsCleanly(t *testing.T) {
	r := startLocalRun(t)
	// Six sample tools and the two the sample ToolSource imports from the
	// docs MCP server; the first version may hold only the six.
	version := r.waitForMatch(t, regexp.MustCompile(`^==> Published version (\d+) of catalog default/assistant with 8 tools`))[1]
	out := strings.Join(r.screen, "\n")
	t.Logf("first screen:\n%s", out)
	for _, s := range []string{"No cluster answers", "Local tool-catalog-operator is starting", "Ctrl-C stops everything"} {
		if !strings.Contains(out, s) {
			t.Errorf("the first screen lacks %q", s)
		}
	}
	if strings.Contains(out, "Starting EventSource") || strings.Contains(r.stderr.String(), "Starting EventSource") {
		t.Errorf("controller-runtime's start-up lines are shown by default:\n%s", r.stderr.String())
	}

	// The sample catalog is in the local Redis.
	addr := regexp.MustCompile(`redis-server\s+(\S+)`).FindStringSubmatch(out)[1]
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	if v, err := rc.Get(context.Background(), "toolcatalog:{default/assistant}:version").Result(); err != nil || v != version {
		t.Fatalf("version in Redis: %q, %v", v, err)
	}

	// Each printed command works when pasted into a shell.
	want := map[string]string{
		"Inspect the catalog, its source and its tools:": "tooldefinition.toolcatalog.dev/docs-search-docs",
		"Search the published catalog:":                  "get_current_weather",
	}
	for i, line := range r.screen {
		expect, ok := want[strings.TrimSpace(line)]
		if !ok || i+1 >= len(r.screen) {
			continue
		}
		delete(want, strings.TrimSpace(line))
		command := strings.TrimSpace(r.screen[i+1])
		res, err := exec.Command("bash", "-c", command).CombinedOutput()
		t.Logf("$ %s\n%s", command, res)
		if err != nil {
			t.Errorf("the printed command failed: %v", err)
		}
		if !strings.Contains(string(res), expect) {
			t.Errorf("the printed command's output lacks %q", expect)
		}
	}
	if len(want) > 0 {
		t.Errorf("the first screen lacks the commands after %v", want)
	}

	// The sample catalog grades itself once published: kubectl describe
	// shows the self-grading.
	inspect := regexp.MustCompile(`(\S+ --kubeconfig \S+) get tc,ts,td`).FindStringSubmatch(out)
	if inspect == nil {
		t.Fatal("no kubectl command on the first screen")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := exec.Command("bash", "-c", inspect[1]+" describe tc assistant").CombinedOutput()
		if err == nil && regexp.MustCompile(`selfRecallAt5:\s+[01]\.\d{3}`).Match(res) && strings.Contains(string(res), "Graded Tools:    8") {
			t.Logf("kubectl describe tc assistant:\n%s", res)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sample catalog shows no self-grading within 60s:\n%s", res)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The printed gateway URL and token work with an MCP client: the
	// sample catalog's bridge finds and calls a tool of the docs server.
	gw := regexp.MustCompile(`(?m)^\s+URL\s+(http://(\S+)/mcp/default/assistant)\n\s+header\s+Authorization: Bearer (\S+)\n\s+metrics\s+(http://\S+/metrics)`).FindStringSubmatch(out)
	if gw == nil {
		t.Fatal("no gateway URL and header on the first screen")
	}
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "localrun-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gw[1], HTTPClient: &http.Client{Transport: bearerTransport(gw[3])}}, nil)
	if err != nil {
		t.Fatalf("connecting to the printed gateway URL: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 4 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tool_call", Arguments: map[string]any{"name": "docs_search_docs", "arguments": map[string]any{"query": "approve an upstream change", "limit": 1}}})
	if err != nil || res.IsError || len(res.Content) == 0 || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "## ") {
		t.Fatalf("tool_call docs_search_docs through the gateway: %+v %v", res, err)
	}
	if resp, getErr := http.Get("http://" + gw[2] + "/metrics"); getErr != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics on the MCP port: %v %v, want 404", resp, getErr)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get(gw[4])
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `toolcatalog_gateway_calls_total{catalog="default/assistant",outcome="ok",tool="docs_search_docs"} 1`) {
		t.Errorf("the gateway's metrics do not count the call:\n%s", metrics)
	}

	// Ctrl-C: the terminal signals the whole pipeline; tee goes first.
	kids := r.children(t)
	if err := r.tee.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	_ = r.tee.Wait()
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range r.lines { //nolint:revive // drain
		}
		done <- r.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("localrun exited with %v after Ctrl-C with its stdout closed:\n%s", err, r.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("localrun did not stop within 60s of Ctrl-C")
	}
	for name, pid := range kids {
		if alive(pid) {
			t.Errorf("%s (pid %d) is still running after Ctrl-C", name, pid)
		}
	}
}

// TestNothingOutlivesAKilledLocalRun kills localrun with SIGKILL, which it
// cannot handle: the kernel must end etcd, kube-apiserver and redis-server
// through their parent-death signal.
func TestNothingOutlivesAKilledLocalRun(t *testing.T) {
	r := startLocalRun(t)
	r.waitForMatch(t, regexp.MustCompile(`^==> Published version \d+ of catalog default/assistant`))
	kids := r.children(t)
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Wait(); err == nil {
		t.Fatal("localrun exited cleanly after SIGKILL")
	}
	// The kernel delivers the parent-death signal as the parent exits;
	// give the children the moment it takes them to die and be reaped.
	deadline := time.Now().Add(10 * time.Second)
	for name, pid := range kids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("%s (pid %d) outlived its killed parent", name, pid)
		}
	}
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && !slices.Contains([]string{"Z", "X"}, fields[0])
}

// childrenOf lists the pids whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state, then ppid.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// bearerTransport adds a bearer token to every request.
type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}
