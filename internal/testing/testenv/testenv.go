// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// project's CRDs installed, from the binaries hack/build-controlplane.sh
// builds. Tests and the local runner of `make run` use it.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	goruntime "runtime"
	"runtime/metrics"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolcatalog/tool-catalog-operator/internal/testing/manifests"
)

// AssetsHint says how to get the binaries.
const AssetsHint = "KUBEBUILDER_ASSETS is not set: run `make test`, or `export KUBEBUILDER_ASSETS=$(bash hack/build-controlplane.sh)` to build kube-apiserver, etcd and kubectl from Go modules"

// Start starts the control plane with the CRDs of root/config/crd/bases
// and of the directories more names, using the binaries in assets
// (KUBEBUILDER_ASSETS when empty). When starting fails half-way, what was
// started is stopped again.
func Start(root, assets string, more ...string) (*envtest.Environment, *rest.Config, error) {
	if assets == "" {
		assets = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if assets == "" {
		return nil, nil, errors.New(AssetsHint)
	}
	guarded, err := guardAssets(assets)
	if err != nil {
		return nil, nil, fmt.Errorf("preparing the control plane's launchers: %w", err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{filepath.Join(root, "config", "crd", "bases")}, more...),
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	// Explicit paths: envtest prefers KUBEBUILDER_ASSETS to
	// BinaryAssetsDirectory, and would start the binaries unguarded.
	env.ControlPlane.GetAPIServer().Path = filepath.Join(guarded, "kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(guarded, "etcd")}
	env.ControlPlane.KubectlPath = filepath.Join(assets, "kubectl")
	cfg, err := env.Start()
	if err != nil {
		stopErr := env.Stop()
		return nil, nil, errors.Join(fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err), stopErr)
	}
	return env, cfg, nil
}

// SharedCRDs are the directories of the CRDs other Kubernetes MCP projects
// publish, kept in ../shared/crds beside the checkout at root (SOURCE.md
// there says where each comes from), or an error that says so.
func SharedCRDs(root string) ([]string, error) {
	dir := filepath.Join(root, "..", "shared", "crds")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("the CRDs of the Kubernetes MCP projects are read from ../shared/crds beside the checkout: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// WaitFor polls cond until it holds, and fails the test saying what it
// waited for when timeout passes first.
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	WaitEvery(t, what, timeout, 20*time.Millisecond, cond)
}

// WaitEvery is WaitFor checking cond every interval, for a cond that
// costs what is measured.
func WaitEvery(t testing.TB, what string, timeout, interval time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

// Namespace creates a namespace named prefix and a random suffix, deleted
// when the test ends, and returns its name.
func Namespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// FreeAddr returns a loopback address with a port nothing listens on now,
// for a process the test starts and restarts on it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// Build builds the command at pkg (a path from the test's package, such as
// ../../cmd/manager) into a temporary directory and returns the binary.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Tool builds a tool pinned in hack/tools/go.mod (helm.sh/helm/v4/cmd/helm)
// into a temporary directory and returns the binary; root is the path
// from the test's package to the repository.
func Tool(t testing.TB, root, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), path.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Join(root, "hack", "tools")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s in hack/tools (its module is fetched from the Go module proxy): %v\n%s", pkg, err, out)
	}
	return bin
}

// Kustomize runs `kubectl kustomize dir` with the kubectl built beside the
// test API server and decodes every object strictly (unknown fields fail).
func Kustomize(t testing.TB, dir string) []runtime.Object {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal(AssetsHint)
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", dir).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	objs, err := manifests.Decode(out)
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	return objs
}

// MetricsReaderToken returns a token of a service account (default/name)
// that may get /metrics when reader is true, and may not when false: what
// a scraper of the manager's and the gateway's metrics sends.
func MetricsReaderToken(ctx context.Context, cfg *rest.Config, name string, reader bool) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	if _, createErr := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); createErr != nil && !apierrors.IsAlreadyExists(createErr) {
		return "", createErr
	}
	if reader {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
		if _, createErr := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); createErr != nil && !apierrors.IsAlreadyExists(createErr) {
			return "", createErr
		}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}}}
		if _, createErr := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); createErr != nil && !apierrors.IsAlreadyExists(createErr) {
			return "", createErr
		}
	}
	hour := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// HeapPeak samples the heap's objects (live and not yet swept) every
// millisecond until stop is called, which returns the highest sample above
// the heap after a collection at the start, in MiB: what an attack on the
// process costs it at its worst.
func HeapPeak() (stop func() float64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	goruntime.GC()
	idle := read()
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		high := idle
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				peak <- high
				return
			case <-tick.C:
				high = max(high, read())
			}
		}
	}()
	return func() float64 {
		close(done)
		return float64(<-peak-idle) / (1 << 20)
	}
}

// PodAddress is an address of this machine a test server can listen on
// and an EndpointSlice may hold, standing for a Pod's: the first IPv4
// address of an interface that is up, not loopback and not link-local
// (the API server refuses those in EndpointSlices). It fails saying so on
// a machine with none.
func PodAddress() (netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			prefix, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			if ip := prefix.Addr(); ip.Is4() && ip.IsGlobalUnicast() {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, errors.New("this machine has no IPv4 address outside the loopback and link-local ranges for a test server to stand for a Pod at (the API server refuses those in EndpointSlices); bring up a network interface with one")
}

// ServePod writes a Service name of port 8080 selecting a Pod at addr, the
// Pod (its status as its kubelet would write it) and the EndpointSlice
// that names the Pod at port, ready or not, as the EndpointSlice
// controller would: the test API server runs neither.
func ServePod(ctx context.Context, c client.Client, ns, name string, addr netip.Addr, port int32, ready bool) (*discoveryv1.EndpointSlice, error) {
	selector := map[string]string{"app": name}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Selector: selector, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(port)}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0", Labels: selector},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mcp", Image: "registry.example/mcp:1"}}}}
	if err := c.Create(ctx, svc); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, pod); err != nil {
		return nil, err
	}
	pod.Status.PodIPs = []corev1.PodIP{{IP: addr.String()}}
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID}}},
		Ports: []discoveryv1.EndpointPort{{Name: new(string), Port: &port}},
	}
	return slice, c.Create(ctx, slice)
}
