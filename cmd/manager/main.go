// Command manager runs the tool-catalog-operator controllers.
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/toolcatalog/tool-catalog-operator/internal/manager"
)

func main() {
	cfg := manager.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := manager.Run(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), *cfg); err != nil {
		ctrl.Log.Error(err, "Manager exited with an error")
		os.Exit(1)
	}
}
