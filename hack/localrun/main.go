// Command localrun is what `make run` runs: the manager against the current
// kubeconfig when a cluster answers, or else a local default with nothing
// to install by hand: kube-apiserver and etcd (built by
// hack/build-controlplane.sh), a redis-server on a free port, the CRDs, the
// samples (builtin providers: no key, no network; the ToolSource imports
// from an MCP server over the docs, served on loopback), the MCP gateway
// with a fresh static token, and the manager in the foreground. Ctrl-C stops everything it started.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/envflag"
	"github.com/toolcatalog/tool-catalog-operator/internal/gateway"
	"github.com/toolcatalog/tool-catalog-operator/internal/manager"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/mcpdemo"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/samples"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		embedded = flag.String("embedded", "auto", "auto: use the current cluster when one answers, else start a local one; always; never")
		stateDir = flag.String("state-dir", "bin/local", "where the local default keeps its kubeconfig and Redis files")
		root     = flag.String("root", ".", "the repository root (CRDs and samples are read from it)")
	)
	// Quiet by default: controller-runtime's start-up lines are detail
	// here; one line per published version says what matters. Ask for
	// more with -zap-log-level=info (make run RUN_ARGS=-zap-log-level=info).
	zapOpts := zap.Options{Development: true, Level: zapcore.WarnLevel}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	redisconn.RouteLogs(ctrl.Log)

	// Shutting down must not depend on stdout: with `make run | tee log`,
	// Ctrl-C ends tee first, and a write to the closed pipe would otherwise
	// kill this process before it stops what it started.
	signal.Ignore(syscall.SIGPIPE)
	// Stop cleanly when make (or whatever started this) dies.
	if err := exitWithParent(syscall.SIGTERM); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *embedded != "always" {
		cfg, where, err := clusterAnswers(ctx)
		if err == nil {
			fmt.Printf("Using the cluster at %s (current kubeconfig). Install the CRDs first with `make install`.\n\n", where)
			// Metrics and probes on loopback, open to this machine alone.
			return manager.Run(ctx, cfg, manager.Config{MetricsAddr: "127.0.0.1:8080", MetricsWithoutAuth: true, ProbeAddr: "127.0.0.1:8081",
				LeaderElectionID: "tool-catalog-operator.toolcatalog.dev", EgressAllow: envflag.List(os.Getenv("EGRESS_ALLOW"))})
		}
		if *embedded == "never" {
			return fmt.Errorf("no cluster answers (%v) and -embedded=never", err)
		}
		fmt.Printf("No cluster answers (%v): starting a local one.\n", err)
	}
	return runLocal(ctx, *root, *stateDir)
}

// clusterAnswers reports whether the current kubeconfig reaches an API
// server within a few seconds.
func clusterAnswers(ctx context.Context) (*rest.Config, string, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return nil, "", errors.New("no usable kubeconfig")
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = 3 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probe)
	if err != nil {
		return nil, "", err
	}
	if _, err := dc.ServerVersion(); err != nil {
		return nil, "", fmt.Errorf("%s does not answer", cfg.Host)
	}
	return cfg, cfg.Host, nil
}

func runLocal(ctx context.Context, root, stateDir string) (retErr error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		fmt.Println("Building kube-apiserver, etcd and kubectl from Go modules (minutes the first time, cached after)...")
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "build-controlplane.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("building the local control plane: %w", err)
		}
		assets = strings.TrimSpace(string(out))
	}
	if err := os.MkdirAll(filepath.Join(stateDir, "redis"), 0o755); err != nil {
		return err
	}
	redis, err := redistest.Start(filepath.Join(stateDir, "redis"))
	if err != nil {
		return err
	}
	defer func() {
		_ = redis.Stop()
		fmt.Println("Stopped redis-server.")
	}()
	env, cfg, err := testenv.Start(root, assets)
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := env.Stop(); stopErr != nil {
			retErr = errors.Join(retErr, stopErr)
		}
		fmt.Println("Stopped kube-apiserver and etcd.")
	}()
	kubeconfig, _ := filepath.Abs(filepath.Join(stateDir, "kubeconfig"))
	if writeFileErr := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); writeFileErr != nil {
		return writeFileErr
	}
	c, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return err
	}
	docsURL, stopDocs, err := serveDocs(root)
	if err != nil {
		return err
	}
	defer stopDocs()
	applied, err := applySamples(ctx, c, filepath.Join(root, "config", "samples"), redis.Addr, docsURL)
	if err != nil {
		return fmt.Errorf("applying the samples: %w", err)
	}
	metricsAddr, probeAddr, gatewayAddr, gatewayMetricsAddr := freeAddr(), freeAddr(), freeAddr(), freeAddr()
	tokens, token, err := writeGatewayToken(stateDir)
	if err != nil {
		return err
	}
	kubectl := filepath.Join(assets, "kubectl")
	bin, _ := filepath.Abs(filepath.Join(root, "bin"))
	fmt.Printf(`
Local tool-catalog-operator is starting:
  kube-apiserver + etcd  %s
  redis-server           %s
  MCP server (docs)      %s
  samples applied        %s
  metrics, probes        http://%s/metrics, http://%s/readyz

Inspect the catalog, its source and its tools:
  %s --kubeconfig %s get tc,ts,td

Search the published catalog:
  PATH=%s:$PATH %s toolcatalog --kubeconfig %s search assistant "weather forecast for Lisbon" --explain

Connect any MCP client to the gateway (Streamable HTTP):
  URL     http://%s/mcp/default/assistant
  header  Authorization: Bearer %s
  metrics http://%s/metrics

Ctrl-C stops everything. Published versions:

`, cfg.Host, redis.Addr, docsURL, strings.Join(applied, ", "), metricsAddr, probeAddr, kubectl, kubeconfig, bin, kubectl, kubeconfig, gatewayAddr, token, gatewayMetricsAddr)

	// The docs server listens on loopback, which the egress policy opens
	// only where it is listed.
	egressAllow := envflag.List(os.Getenv("EGRESS_ALLOW"))
	if len(egressAllow) == 0 {
		egressAllow = egress.Everywhere
	}
	egressAllow = append(slices.Clone(egressAllow), docsURL)
	go reportPublished(ctx, c)
	// The sample ToolSource holds its first import for approval, as every
	// RequireApproval source does: the local runner approves it as you
	// would, once you had read it.
	go func() {
		n, approveErr := samples.ApproveFirstImport(ctx, c, client.ObjectKey{Namespace: "default", Name: "docs"}, 5*time.Minute)
		if approveErr != nil {
			fmt.Printf("the first import of ToolSource docs was not approved: %v\n", approveErr)
			return
		}
		fmt.Printf("approved the first import of ToolSource docs (%d tools), as `kubectl toolcatalog approve docs --all` does\n", n)
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gatewayDone := make(chan error, 1)
	go func() {
		gatewayDone <- gateway.Run(ctx, cfg, gateway.Config{Addr: gatewayAddr, MetricsAddr: gatewayMetricsAddr, MetricsWithoutAuth: true, Audit: true, StaticTokens: tokens, EgressAllow: egressAllow, Version: "local", Log: ctrl.Log.WithName("gateway")})
	}()
	// Every address is on loopback: the metrics are open to this machine
	// alone, without the token a cluster's scraper sends.
	err = manager.Run(ctx, cfg, manager.Config{MetricsAddr: metricsAddr, MetricsWithoutAuth: true, ProbeAddr: probeAddr, LeaderElectionID: "tool-catalog-operator.toolcatalog.dev", EgressAllow: egressAllow})
	cancel()
	return errors.Join(err, <-gatewayDone)
}

// writeGatewayToken writes a new random static token of the user
// local-user for the gateway, and returns the file and the token.
func writeGatewayToken(stateDir string) (string, string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	token := hex.EncodeToString(b)
	path, err := filepath.Abs(filepath.Join(stateDir, "gateway-tokens.csv"))
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(path, []byte(token+",local-user,local-user,\"local\"\n"), 0o600); err != nil {
		return "", "", err
	}
	return path, token, nil
}

// serveDocs serves the MCP server over the project's docs on loopback, for
// the sample ToolSource.
func serveDocs(root string) (string, func(), error) {
	docs, err := mcpdemo.Load(filepath.Join(root, "docs"))
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: docs.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String() + "/mcp", func() { _ = srv.Close() }, nil
}

// applySamples creates the sample objects in the default namespace, with
// the catalog pointed at the local Redis and the source at the local MCP
// server.
func applySamples(ctx context.Context, c client.Client, dir, redisAddr, docsURL string) ([]string, error) {
	objs, err := samples.Load(dir)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, u := range objs {
		u.SetNamespace("default")
		if u.GetKind() == "ToolCatalog" {
			if err := unstructured.SetNestedStringSlice(u.Object, []string{redisAddr}, "spec", "redis", "addresses"); err != nil {
				return nil, err
			}
		}
		if u.GetKind() == "ToolSource" {
			if err := unstructured.SetNestedField(u.Object, docsURL, "spec", "mcp", "url"); err != nil {
				return nil, err
			}
		}
		if err := c.Create(ctx, u); err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
		applied = append(applied, strings.ToLower(u.GetKind())+"/"+u.GetName())
	}
	return applied, nil
}

// reportPublished prints one line for every version a catalog publishes.
func reportPublished(ctx context.Context, c client.Client) {
	seen := map[string]int64{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		list := &v1alpha1.ToolCatalogList{}
		if err := c.List(ctx, list); err == nil {
			for _, tc := range list.Items {
				id := tc.Namespace + "/" + tc.Name
				if tc.Status.Version <= seen[id] || !meta.IsStatusConditionTrue(tc.Status.Conditions, v1alpha1.ConditionPublished) {
					continue
				}
				seen[id] = tc.Status.Version
				tools := int32(0)
				if tc.Status.Counts != nil {
					tools = tc.Status.Counts.Tools
				}
				fmt.Printf("==> Published version %d of catalog %s with %d tools.\n", tc.Status.Version, id, tools)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
