package controllers

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/internal/redistest"
	"github.com/toolcatalog/tool-catalog-operator/internal/testenv"
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
	// suiteProviders is the reconciler's provider factory.
	suiteProviders = &injectedProviders{
		generators: map[string]embedding.QueryGenerator{}, last: map[string]embedding.Embedder{}, builds: map[string]int{},
	}
)

const (
	// directLabel marks catalogs the suite's manager does not reconcile.
	directLabel       = "test.toolcatalog.dev/direct"
	eventuallyTimeout = 20 * time.Second
	pollInterval      = 100 * time.Millisecond
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(testScheme))
	utilruntime.Must(v1alpha1.AddToScheme(testScheme))
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// Every line, at debug level, is kept for tests that check what the
	// manager logs; stderr shows what TEST_LOG_LEVEL asks for.
	keep := zapcore.NewCore(zapcore.NewJSONEncoder(uberzap.NewDevelopmentEncoderConfig()), zapcore.AddSync(managerLogs), zapcore.DebugLevel)
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel()),
		zap.RawZapOpts(uberzap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, keep) }))))
	redisconn.RouteLogs(ctrl.Log)

	var err error
	if testEnv, cfg, err = testenv.Start("..", ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := testEnv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping envtest: %v\n", err)
		}
	}()

	dir, err := os.MkdirTemp("", "toolcatalog-suite-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, testEnv.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// Tests create hundreds of objects; client-go's default 5 QPS would
	// make that crawl.
	cfg.QPS, cfg.Burst = 500, 1000
	if k8sClient, err = client.New(cfg, client.Options{Scheme: testScheme}); err != nil {
		fmt.Fprintf(os.Stderr, "creating client: %v\n", err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Catalogs labelled directLabel are left to tests that call Reconcile
	// themselves, with a client that fails on command.
	notDirect, err := labels.Parse("!" + directLabel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{ByObject: map[client.Object]cache.ByObject{&v1alpha1.ToolCatalog{}: {Label: notDirect}}},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "creating manager: %v\n", err)
		return 1
	}
	suiteManager = mgr
	if err := (&ToolDefinitionReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("tooldefinition-controller"),
	}).SetupWithManager(mgr); err != nil {
		fmt.Fprintf(os.Stderr, "setting up tooldefinition controller: %v\n", err)
		return 1
	}
	redisServer, err = redistest.Start("")
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting redis-server: %v\n", err)
		return 1
	}
	defer redisServer.Stop()
	fast := embedding.DefaultRetryPolicy()
	fast.MaxRetries = 1
	fast.Backoff.Duration = 10 * time.Millisecond
	redisPool = redisconn.NewPool()
	defer redisPool.Close()
	if err := (&ToolCatalogReconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorder("toolcatalog-controller"),
		Redis:       redisPool,
		RetryPolicy: &fast,
		Providers:   suiteProviders,
	}).SetupWithManager(ctx, mgr); err != nil {
		fmt.Fprintf(os.Stderr, "setting up toolcatalog controller: %v\n", err)
		return 1
	}
	// Test servers listen on 127.0.0.1; 127.0.0.2 stands for what the
	// policy denies (a metadata service, an internal host).
	policy, err := egress.New([]string{"127.0.0.1/32"}, cfg.Host)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := (&ToolSourceReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("toolsource-controller"),
		Egress:    policy,
		MaxTools:  100,
	}).SetupWithManager(mgr); err != nil {
		fmt.Fprintf(os.Stderr, "setting up toolsource controller: %v\n", err)
		return 1
	}
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()

	code := m.Run()
	cancel()
	if err := <-mgrDone; err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		return 1
	}
	return code
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
	return testenv.Namespace(t, k8sClient, "test-")
}
