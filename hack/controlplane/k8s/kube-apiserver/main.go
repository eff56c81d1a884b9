// Command kube-apiserver mirrors k8s.io/kubernetes/cmd/kube-apiserver so the
// API server used by envtest is built from Go modules instead of downloaded.
package main

import (
	"os"
	_ "time/tzdata" // time zone data for CronJob validation

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
