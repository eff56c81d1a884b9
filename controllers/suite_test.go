package controllers

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	uberzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers/tooldefinition"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolsource"
	"github.com/toolcatalog/tool-catalog-operator/controllers/toolsourcetemplate"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube/cached"
	"github.com/toolcatalog/tool-catalog-operator/internal/records"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/serverref"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/redistest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/suite"
	"github.com/toolcatalog/tool-catalog-operator/internal/testing/testenv"
)

// The suite runs one real kube-apiserver and etcd (envtest) with the CRDs of
// config/crd/bases installed and the controllers running in a manager.
var (
	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8sClient  client.Client
	testScheme = runtime.NewScheme()
	kubeconfig string
	// redisServer is the real redis-server the catalogs of the suite use.
	redisServer *redistest.Server
	redisPool   *redisconn.Pool
	// suiteManager runs the suite's controllers.
	suiteManager ctrl.Manager
	// suiteLedger takes the catalogs' records to the suite's
	// ToolDefinition reconciler. Direct catalogs have ledgers of their
	// own, which no reconciler reads: the suite's cache does not hold
	// them.
	suiteLedger = records.NewLedger()
	// suiteProviders is the reconciler's provider factory.
	suiteProviders = &injectedProviders{
		generators: map[string]embedding.QueryGenerator{}, last: map[string]embedding.Embedder{}, builds: map[string]int{},
	}
)

const (
	// templateMaxServers is --template-max-servers of the suite.
	templateMaxServers = 3
	// directLabel marks catalogs the suite's manager does not reconcile.
	directLabel       = "test.toolcatalog.dev/direct"
	eventuallyTimeout = 20 * time.Second
	pollInterval      = 100 * time.Millisecond
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(testScheme))
	utilruntime.Must(v1alpha1.AddToScheme(testScheme))
}

// cluster is the suite's API server, Redis and manager: the first test
// that needs them (newNamespace) starts them, so the pure tests of the
// package run without KUBEBUILDER_ASSETS or redis-server.
var cluster = suite.New(startCluster)

func TestMain(m *testing.M) {
	// Every line, at debug level, is kept for tests that check what the
	// manager logs; stderr shows what TEST_LOG_LEVEL asks for.
	keep := zapcore.NewCore(zapcore.NewJSONEncoder(uberzap.NewDevelopmentEncoderConfig()), zapcore.AddSync(managerLogs), zapcore.DebugLevel)
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel()),
		zap.RawZapOpts(uberzap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, keep) }))))
	redisconn.RouteLogs(ctrl.Log)
	os.Exit(cluster.Main(m))
}

func startCluster(onStop func(func() error)) error {
	var err error
	// The CRDs of the Kubernetes MCP projects a ToolSource may reference.
	crds, err := testenv.SharedCRDs("..")
	if err != nil {
		return err
	}
	if testEnv, cfg, err = testenv.Start("..", "", crds...); err != nil {
		return err
	}
	onStop(testEnv.Stop)

	dir, err := os.MkdirTemp("", "toolcatalog-suite-")
	if err != nil {
		return err
	}
	onStop(func() error { return os.RemoveAll(dir) })
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if writeFileErr := os.WriteFile(kubeconfig, testEnv.KubeConfig, 0o600); writeFileErr != nil {
		return writeFileErr
	}

	// Tests create hundreds of objects; client-go's default 5 QPS would
	// make that crawl.
	cfg.QPS, cfg.Burst = 500, 1000
	if k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme}); err != nil {
		return fmt.Errorf("creating client: %w", err)
	}

	// Catalogs labelled directLabel are left to tests that call Reconcile
	// themselves, with a client that fails on command.
	notDirect, err := labels.Parse("!" + directLabel)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: map[client.Object]cache.ByObject{&v1alpha1.ToolCatalog{}: {Label: notDirect}}},
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	suiteManager = mgr
	if err = (&tooldefinition.Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("tooldefinition-controller"),
		Ledger:   suiteLedger,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up tooldefinition controller: %w", err)
	}
	if redisServer, err = redistest.Start(""); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	onStop(redisServer.Stop)
	fast := embedding.DefaultRetryPolicy()
	fast.MaxRetries = 1
	fast.Backoff.Duration = 10 * time.Millisecond
	redisPool = redisconn.NewPool()
	onStop(func() error { redisPool.Close(); return nil })
	// Test servers listen on 127.0.0.1; 127.0.0.2 stands for what the
	// policy denies (a metadata service, an internal host).
	policy, err := egress.New([]string{"127.0.0.1/32"}, cfg.Host)
	if err != nil {
		return err
	}
	suiteProviders.Egress = policy
	ctx, cancel := context.WithCancel(context.Background())
	writer := records.NewWriter(suiteLedger, &cached.Objects{Reader: mgr.GetClient(), Informers: mgr.GetCache()}, mgr.GetClient())
	if err = catalogReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("toolcatalog-controller"), mgr.GetCache(), &fast, suiteProviders, writer, nil).SetupWithManager(ctx, mgr); err != nil {
		cancel()
		return fmt.Errorf("setting up toolcatalog controller: %w", err)
	}
	// The suite's Pods are at this machine's address (a serverRef test's
	// server listens there): the Pod networks hold it alone.
	var podNetworks []netip.Prefix
	if podAddr, addrErr := testenv.PodAddress(); addrErr == nil {
		podNetworks = []netip.Prefix{netip.PrefixFrom(podAddr, 32)}
	}
	if err := (&toolsource.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("toolsource-controller"),
		Egress:    policy,
		Servers:   &serverref.Resolver{Reader: mgr.GetAPIReader(), PodNetworks: podNetworks},
		MaxTools:  100,
	}).SetupWithManager(mgr); err != nil {
		cancel()
		return fmt.Errorf("setting up toolsource controller: %w", err)
	}
	if err := (&toolsourcetemplate.Reconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   mgr.GetEventRecorder("toolsourcetemplate-controller"),
		MaxServers: templateMaxServers,
	}).SetupWithManager(mgr); err != nil {
		cancel()
		return fmt.Errorf("setting up toolsourcetemplate controller: %w", err)
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	onStop(func() error {
		cancel()
		if err := <-mgrDone; err != nil {
			return fmt.Errorf("manager: %w", err)
		}
		return nil
	})
	return nil
}

// logBuffer is a log sink safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything logged so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// managerLogs holds every line the manager logged, at every level.
var managerLogs = &logBuffer{}

// zapLevel keeps controller logs quiet (tests provoke reconcile errors on
// purpose) unless TEST_LOG_LEVEL=debug or =error asks for them.
func zapLevel() zapcore.Level {
	switch os.Getenv("TEST_LOG_LEVEL") {
	case "debug":
		return zapcore.DebugLevel
	case "error":
		return zapcore.ErrorLevel
	}
	return zapcore.DPanicLevel
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	cluster.Use(t)
	return testenv.Namespace(t, k8sClient, "test-")
}
