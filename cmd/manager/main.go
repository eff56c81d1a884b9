// Command manager runs the tool-catalog-operator controllers.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/controllers"
	"github.com/toolcatalog/tool-catalog-operator/internal/store"
)

func main() {
	var (
		metricsAddr, probeAddr string
		leaderElect            bool
		qps                    float64
		burst                  int
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the health and readiness probes bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one of several replicas reconciles.")
	flag.Float64Var(&qps, "kube-api-qps", 50, "Queries per second to the Kubernetes API; status writes for many tools need more than client-go's default of 5.")
	flag.IntVar(&burst, "kube-api-burst", 100, "Burst of queries to the Kubernetes API.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	store.RouteLogs(ctrl.Log)

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	restCfg := ctrl.GetConfigOrDie()
	restCfg.QPS, restCfg.Burst = float32(qps), burst
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "tool-catalog-operator.toolcatalog.dev",
	})
	if err != nil {
		log.Error(err, "Unable to create manager")
		os.Exit(1)
	}
	if err := (&controllers.ToolDefinitionReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("tooldefinition-controller"),
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "Unable to set up controller", "controller", "tooldefinition")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	redisPool := store.NewPool()
	defer redisPool.Close()
	if err := (&controllers.ToolCatalogReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("toolcatalog-controller"),
		Redis:     redisPool,
	}).SetupWithManager(ctx, mgr); err != nil {
		log.Error(err, "Unable to set up controller", "controller", "toolcatalog")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Unable to set up health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Unable to set up readiness check")
		os.Exit(1)
	}

	log.Info("Starting manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Manager exited with an error")
		os.Exit(1)
	}
}
