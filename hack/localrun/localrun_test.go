package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolcatalog/tool-catalog-operator/internal/plugin"
	"github.com/toolcatalog/tool-catalog-operator/internal/testenv"
)

// TestEmbeddedModeStartsPublishesAndStopsCleanly runs what `make run` runs
// on a machine without a cluster, as a separate process.
func TestEmbeddedModeStartsPublishesAndStopsCleanly(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal(testenv.AssetsHint)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "localrun")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state := filepath.Join(dir, "state")
	cmd := exec.Command(bin, "-state-dir", state, "-root", filepath.Join("..", ".."))
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(dir, "no-such-kubeconfig"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	// Read what a newcomer sees until the catalog is published.
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var screen []string
	deadline := time.After(90 * time.Second)
	published := false
	for !published {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("localrun exited early:\n%s\n%s", strings.Join(screen, "\n"), stderr.String())
			}
			screen = append(screen, l)
			published = strings.HasPrefix(l, "==> Published version 1 of catalog default/assistant with 6 tools")
		case <-deadline:
			t.Fatalf("not published within 90s:\n%s\n%s", strings.Join(screen, "\n"), stderr.String())
		}
	}
	out := strings.Join(screen, "\n")
	t.Logf("first screen:\n%s", out)
	for _, s := range []string{"No cluster answers", "Local tool-catalog-operator is starting", "get tc,td", "toolcatalog --kubeconfig", "search assistant", "Ctrl-C stops everything"} {
		if !strings.Contains(out, s) {
			t.Errorf("the first screen lacks %q", s)
		}
	}

	// The sample catalog is in the local Redis ...
	addr := regexp.MustCompile(`redis-server\s+(\S+)`).FindStringSubmatch(out)[1]
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	if v, err := rc.Get(context.Background(), "toolcatalog:{default/assistant}:version").Result(); err != nil || v != "1" {
		t.Fatalf("version in Redis: %q, %v", v, err)
	}
	// ... and the printed search finds sensible tools.
	restCfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(state, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	var res bytes.Buffer
	search := plugin.NewCommand(&plugin.Options{Out: &res, Err: &res, RESTConfig: restCfg, Namespace: "default"})
	search.SetArgs([]string{"search", "assistant", "weather forecast for Lisbon"})
	if err := search.Execute(); err != nil {
		t.Fatalf("search: %v\n%s", err, res.String())
	}
	t.Logf("kubectl toolcatalog search assistant \"weather forecast for Lisbon\":\n%s", res.String())
	if !strings.Contains(res.String(), "get_current_weather") {
		t.Fatalf("the weather tool is not found:\n%s", res.String())
	}

	// Ctrl-C stops everything it started.
	children := childrenOf(cmd.Process.Pid)
	if len(children) < 3 {
		t.Fatalf("expected etcd, kube-apiserver and redis-server as children, found pids %v", children)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range lines { //nolint:revive // drain
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("localrun exited with %v after Ctrl-C:\n%s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("localrun did not stop within 60s of Ctrl-C")
	}
	for _, pid := range children {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("child process %d is still running after Ctrl-C", pid)
		}
	}
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
