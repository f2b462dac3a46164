// CoreDNS v1.15.0 with only the plugins that kubeadm's default Corefile uses, for the offline
// kind node image (ci/kind/build tags it as kubeadm's addon image).
//
// Why a subset: `go install github.com/coredns/coredns@v1.15.0` compiles every plugin in its
// plugin.cfg (core/plugin/zplugin.go imports them all), and with them hundreds of modules (the
// AWS, Azure, Google Cloud and DataDog SDKs, etcd, Nomad, geoip, ...). That build took more than
// 14 minutes on CI's 2-core machine. kubeadm's Corefile (its CoreDNSConfigMap in
// cmd/kubeadm/app/phases/addons/dns/manifests.go) needs only errors, health, ready,
// kubernetes, prometheus, forward, cache, loop, reload and loadbalance; log is added because
// it is cheap and handy when debugging the cluster by hand.
//
// The blank imports register those plugins (each package's init calls plugin.Register). Some
// of them import further plugin packages, which register themselves too: kubernetes imports
// metadata and transfer, forward imports debug and dnstap (cache and log import metadata).
// Those are compiled in whatever we do, so they are listed in the directives as well, which
// keeps every registered plugin usable; they cost nothing at run time unless a Corefile names
// them.
//
// Directive order is execution order and matters (every plugin sees the effects of those
// after it). The list below is the upstream order with everything else left out: it comes
// from plugin.cfg in github.com/coredns/coredns v1.15.0, as generated into
// core/dnsserver/zdirectives.go. Check it again when COREDNS_VERSION changes.
package main

import (
	"fmt"
	"os"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics" // the "prometheus" directive
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is core/dnsserver/zdirectives.go of v1.15.0 restricted to the plugins above
// (marked "dependency" where only an imported plugin brings it in).
var directives = []string{
	"metadata", // dependency (kubernetes, forward, cache, log)
	"reload",
	"debug", // dependency (forward)
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"dnstap", // dependency (forward)
	"loadbalance",
	"cache",
	"transfer", // dependency (kubernetes)
	"kubernetes",
	"loop",
	"forward",
}

func main() {
	if err := dnsserver.SetDirectives(directives); err != nil {
		fmt.Fprintln(os.Stderr, "coredns:", err)
		os.Exit(1)
	}
	coremain.Run()
}
