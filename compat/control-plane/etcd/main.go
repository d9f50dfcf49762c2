// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3 module at the version
// the pinned Kubernetes release requires, so the control plane comes from one module graph.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
