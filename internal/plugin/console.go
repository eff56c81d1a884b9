package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/console"
	"github.com/toolcatalog/tool-catalog-operator/pkg/contract"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

func (o *Options) consoleCommand() *cobra.Command {
	var (
		address      string
		noBrowser    bool
		allNamespace bool
	)
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Open a local web console of the catalogs, with your own Kubernetes rights",
		Long: `Serve a web console on this machine (127.0.0.1) and open it in the browser.
It reads and changes the cluster with your kubeconfig and rights, and reads
each catalog's Redis as the other commands do (--redis-addr for a
port-forward): what you may not do with kubectl, it cannot do either.`,
		Example: `  kubectl toolcatalog console
  kubectl toolcatalog console -A --no-browser --address 127.0.0.1:8089`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv, err := o.consoleServer(cmd.Context(), allNamespace)
			if err != nil {
				return err
			}
			l, err := listenLoopback(address)
			if err != nil {
				return err
			}
			srv.Addr = l.Addr().String()
			url := "http://" + srv.Addr + "/"
			fmt.Fprintf(cmd.OutOrStdout(), "Console of %v at %s (Ctrl-C to stop)\n", srv.Namespaces, url)
			if !noBrowser {
				if err := openBrowser(url); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "could not open a browser (%v): open %s yourself\n", err, url)
				}
			}
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-cmd.Context().Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = hs.Shutdown(ctx)
			}()
			if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1:0", "loopback host:port to serve on (port 0: any free port)")
	cmd.Flags().BoolVar(&noBrowser, "no-browser", false, "print the URL without opening a browser")
	cmd.Flags().BoolVarP(&allNamespace, "all-namespaces", "A", false, "show the catalogs of every namespace you may list")
	return cmd
}

// consoleServer is the console of the namespace (or, with all, of every
// namespace the user may list), acting as the user.
func (o *Options) consoleServer(ctx context.Context, all bool) (*console.Server, error) {
	kube, ns, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	namespaces := []string{ns}
	if all {
		var list corev1.NamespaceList
		if err := kube.List(ctx, &list, "", nil); err != nil {
			return nil, fmt.Errorf("listing namespaces for --all-namespaces: %w", err)
		}
		namespaces = namespaces[:0]
		for _, n := range list.Items {
			namespaces = append(namespaces, n.Name)
		}
	}
	return &console.Server{Kube: kube, Namespaces: namespaces,
		Load: func(ctx context.Context, tc *v1alpha1.ToolCatalog) (*console.Published, error) {
			s, err := o.connect(ctx, kube, tc)
			if err != nil {
				return nil, err
			}
			defer s.Close()
			cat, err := toolcatalog.Load(ctx, s.redis, s.config.Keys)
			if err != nil {
				return nil, err
			}
			pub := &console.Published{Catalog: cat}
			if s.embedder != nil {
				pub.Embedder = s.embedder
			}
			if pub.MostUsed, err = toolcatalog.MostUsed(ctx, s.redis, s.config.Keys, cat); err != nil {
				return nil, err
			}
			return pub, nil
		},
		Redis: func(ctx context.Context, tc *v1alpha1.ToolCatalog, read func(redis.UniversalClient, contract.Keys) error) error {
			s, err := o.connect(ctx, kube, tc)
			if err != nil {
				return err
			}
			defer s.Close()
			return read(s.redis, s.config.Keys)
		}}, nil
}

// listenLoopback listens on address, which must be on a loopback
// interface: the console acts with the user's credentials, so no one else
// may reach it.
func listenLoopback(address string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("--address %q: %w", address, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--address %q is not a loopback address: the console acts with your credentials, so it serves this machine only", address)
	}
	return net.Listen("tcp", address)
}

func openBrowser(url string) error {
	name, args := "xdg-open", []string{url}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", url}
	}
	return exec.Command(name, args...).Start()
}
