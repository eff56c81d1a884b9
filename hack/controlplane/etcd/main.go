// Command etcd runs the etcd server from go.etcd.io/etcd/server/v3/etcdmain so
// envtest can use an etcd built from Go modules instead of downloaded.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
