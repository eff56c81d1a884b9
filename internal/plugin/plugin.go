// Package plugin implements kubectl-toolcatalog, the kubectl plugin that
// searches published catalogs, shows what a tool was embedded from, lists
// versions, requests refreshes, purges recorded requests, imports an MCP
// server's tools as ToolDefinitions, approves upstream tool changes and
// runs the offline check of tool manifests.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
	"github.com/toolcatalog/tool-catalog-operator/internal/catalogconfig"
	"github.com/toolcatalog/tool-catalog-operator/internal/egress"
	"github.com/toolcatalog/tool-catalog-operator/internal/embedding"
	"github.com/toolcatalog/tool-catalog-operator/internal/kube"
	"github.com/toolcatalog/tool-catalog-operator/internal/redisconn"
	"github.com/toolcatalog/tool-catalog-operator/pkg/toolcatalog"
)

// Options are the plugin's global flags and its environment.
type Options struct {
	Kubeconfig, Context, Namespace string
	// RedisAddr overrides the catalog's Redis addresses (for example a
	// port-forward to an in-cluster Redis); RedisPasswordEnv names an
	// environment variable with the password to use then.
	RedisAddr, RedisPasswordEnv string
	// EgressAllow opens destinations to the catalog's provider endpoints
	// (egress.New); the endpoints are a namespace user's choice, so by
	// default private networks, cluster names, loopback and metadata
	// addresses are not reached from the plugin either.
	EgressAllow []string
	Out, Err    io.Writer
	// RESTConfig, when set, replaces kubeconfig loading (tests).
	RESTConfig *rest.Config
}

// NewCommand returns the kubectl-toolcatalog command tree.
func NewCommand(o *Options) *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-toolcatalog",
		Short:         "Search and manage the tool catalogs published by tool-catalog-operator",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(o.Out)
	root.SetErr(o.Err)
	f := root.PersistentFlags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file")
	f.StringVar(&o.Context, "context", "", "kubeconfig context to use")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the ToolCatalog (default: the context's)")
	f.StringVar(&o.RedisAddr, "redis-addr", "", "connect to this Redis host:port instead of the catalog's addresses")
	f.StringVar(&o.RedisPasswordEnv, "redis-password-env", "", "environment variable holding the Redis password, with --redis-addr")
	f.StringSliceVar(&o.EgressAllow, "egress-allow", nil, "URL prefixes and address ranges the catalog's embedding endpoint may be at, when it is not a public address (as the manager's --egress-allow)")
	root.AddCommand(o.searchCommand(), o.describeToolCommand(), o.describeSourceCommand(), o.refreshCommand(), o.versionsCommand(), o.diffCommand(), o.purgeRequestsCommand(), o.importCommand(), o.approveCommand(), o.consoleCommand(), o.checkCommand())
	return root
}

// session is what a command works with: the catalog object, its resolved
// configuration and a Redis client.
type session struct {
	kube    *kube.Client
	catalog *v1alpha1.ToolCatalog
	config  *catalogconfig.Config
	redis   redis.UniversalClient
	// embedder embeds queries with the catalog's model; nil when the
	// configuration could not be resolved (search falls back to BM25).
	embedder embedding.Embedder
}

func (s *session) Close() {
	if s.redis != nil {
		_ = s.redis.Close()
	}
}

func (o *Options) kubeClient() (*kube.Client, string, error) {
	cfg, ns := o.RESTConfig, o.Namespace
	if cfg == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.Kubeconfig
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
		var err error
		if cfg, err = cc.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
		}
		if ns == "" {
			if ns, _, err = cc.Namespace(); err != nil {
				return nil, "", err
			}
		}
	}
	if ns == "" {
		ns = "default"
	}
	c, err := kube.New(cfg)
	return c, ns, err
}

// open reads the catalog and, when withRedis, connects to its Redis.
func (o *Options) open(ctx context.Context, name string, withRedis bool) (*session, error) {
	kube, ns, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	tc := &v1alpha1.ToolCatalog{}
	if err := kube.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, tc); err != nil {
		return nil, fmt.Errorf("reading ToolCatalog %s/%s: %w", ns, name, err)
	}
	if !withRedis {
		return &session{kube: kube, catalog: tc}, nil
	}
	return o.connect(ctx, kube, tc)
}

// connect resolves a catalog's configuration and connects to its Redis.
func (o *Options) connect(ctx context.Context, kube *kube.Client, tc *v1alpha1.ToolCatalog) (*session, error) {
	s := &session{kube: kube, catalog: tc}
	var err error
	resolver := &catalogconfig.Resolver{Reader: kube}
	s.config, err = resolver.Resolve(ctx, tc)
	if err == nil {
		var policy *egress.Policy
		if policy, err = egress.New(o.EgressAllow); err != nil {
			return nil, fmt.Errorf("--egress-allow: %w", err)
		}
		var p catalogconfig.Providers
		if p, err = catalogconfig.BuildProviders(s.config.Providers, policy); err == nil {
			s.embedder = p.Embedder
		}
	}
	if err != nil {
		var ce *catalogconfig.Error
		if !errors.As(err, &ce) || catalogconfig.CheckKeyPrefix(tc) != nil {
			return nil, err
		}
		fmt.Fprintf(o.Err, "warning: %s: queries are ranked by BM25 alone\n", ce.Message)
		// A provider that cannot be built (its Secret missing, say) does
		// not stop reading the catalog and searching it with BM25.
		s.config = &catalogconfig.Config{Keys: catalogconfig.KeysOf(tc)}
		if o.RedisAddr == "" {
			if s.config.Redis, err = resolver.RedisOptions(ctx, tc); err != nil {
				return nil, err
			}
		}
	}
	opts := s.config.Redis
	if o.RedisAddr != "" {
		opts = redisconn.Options{Addresses: []string{o.RedisAddr}, Mode: string(v1alpha1.RedisModeStandalone)}
		if o.RedisPasswordEnv != "" {
			opts.Password = os.Getenv(o.RedisPasswordEnv)
		}
	}
	s.redis = redisconn.NewClient(opts)
	return s, nil
}

func (s *session) load(ctx context.Context) (*toolcatalog.Catalog, error) {
	c, err := toolcatalog.Load(ctx, s.redis, s.config.Keys)
	if errors.Is(err, toolcatalog.ErrNotPublished) {
		return nil, fmt.Errorf("catalog %s/%s has not been published to Redis yet (see kubectl describe tc %s)", s.catalog.Namespace, s.catalog.Name, s.catalog.Name)
	}
	return c, err
}

func withTimeout(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), 60*time.Second)
}
