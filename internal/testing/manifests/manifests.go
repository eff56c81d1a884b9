// Package manifests reads rendered Kubernetes manifests (kustomize or Helm
// output) and says what they grant and how their pods run, so that tests
// can hold every way of installing the operator to the same rules.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Decode decodes a stream of YAML documents. Kinds client-go and the CRD
// API know are decoded strictly, so an unknown or misplaced field fails;
// others (a ServiceMonitor) come back as unstructured objects.
func Decode(data []byte) ([]runtime.Object, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []runtime.Object
	reader := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if runtime.IsNotRegisteredError(err) {
			u := &unstructured.Unstructured{}
			if unmarshalErr := yaml.Unmarshal(doc, &u.Object); unmarshalErr != nil {
				return nil, unmarshalErr
			}
			obj = u
		} else if err != nil {
			return nil, fmt.Errorf("object does not decode strictly: %w\n%s", err, doc)
		}
		if u, ok := obj.(*unstructured.Unstructured); ok && len(u.Object) == 0 {
			continue // a document of comments only
		}
		objs = append(objs, obj)
	}
}

// Grant is one right a ServiceAccount holds: a verb on a resource, in a
// namespace or, with Namespace empty, cluster-wide.
type Grant struct {
	Account, Namespace, Group, Resource, Verb string
}

func (g Grant) String() string {
	where := "cluster-wide"
	if g.Namespace != "" {
		where = "in " + g.Namespace
	}
	return fmt.Sprintf("%s may %s %s.%s %s", g.Account, g.Verb, g.Resource, g.Group, where)
}

// Grants lists what the bindings among objs grant to ServiceAccounts,
// sorted, following each binding to its Role or ClusterRole. A binding to
// a role that is not among objs is an error.
func Grants(objs []runtime.Object) ([]Grant, error) {
	roles := map[string][]rbacv1.PolicyRule{} // "Role/ns/name" or "ClusterRole//name"
	for _, o := range objs {
		switch v := o.(type) {
		case *rbacv1.Role:
			roles["Role/"+v.Namespace+"/"+v.Name] = v.Rules
		case *rbacv1.ClusterRole:
			roles["ClusterRole//"+v.Name] = v.Rules
		}
	}
	var out []Grant
	grant := func(binding string, ref rbacv1.RoleRef, namespace string, subjects []rbacv1.Subject) error {
		key := ref.Kind + "//" + ref.Name
		if ref.Kind == "Role" {
			key = ref.Kind + "/" + namespace + "/" + ref.Name
		}
		rules, ok := roles[key]
		if !ok {
			return fmt.Errorf("%s binds %s %s, which is not rendered", binding, ref.Kind, ref.Name)
		}
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				return fmt.Errorf("%s binds %s %s; only ServiceAccounts are expected", binding, s.Kind, s.Name)
			}
			for _, r := range rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							out = append(out, Grant{Account: s.Name, Namespace: namespace, Group: g, Resource: res, Verb: v})
						}
					}
				}
			}
		}
		return nil
	}
	for _, o := range objs {
		var err error
		switch v := o.(type) {
		case *rbacv1.RoleBinding:
			err = grant("RoleBinding "+v.Namespace+"/"+v.Name, v.RoleRef, v.Namespace, v.Subjects)
		case *rbacv1.ClusterRoleBinding:
			err = grant("ClusterRoleBinding "+v.Name, v.RoleRef, "", v.Subjects)
		}
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b Grant) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out), nil
}

// Hardened says how a Deployment falls short of the restricted pod
// security standard, requests, a memory limit and health probes.
func Hardened(deploy *appsv1.Deployment) []string {
	var out []string
	spec := deploy.Spec.Template.Spec
	pod := spec.SecurityContext
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		out = append(out, fmt.Sprintf("%s: pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", deploy.Name, pod))
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			out = append(out, fmt.Sprintf("%s/%s: container securityContext %+v: want no privilege escalation, read-only root, all capabilities dropped", deploy.Name, c.Name, sc))
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			out = append(out, fmt.Sprintf("%s/%s: resources %+v: want requests and a memory limit", deploy.Name, c.Name, c.Resources))
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
			c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			out = append(out, fmt.Sprintf("%s/%s: probes: liveness %+v readiness %+v", deploy.Name, c.Name, c.LivenessProbe, c.ReadinessProbe))
		}
	}
	return out
}

// CheckProvenancePolicy checks that the admission policy that lets only
// the manager make a ToolSource the owner of a ToolDefinition names the
// service account the manager's Deployment runs as: naming another would
// refuse every tool the manager imports.
func CheckProvenancePolicy(objs []runtime.Object) error {
	var user, condition string
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.Deployment:
			if v.Labels["app.kubernetes.io/component"] == "manager" || strings.HasSuffix(v.Name, "controller-manager") {
				user = "system:serviceaccount:" + v.Namespace + ":" + v.Spec.Template.Spec.ServiceAccountName
			}
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			if strings.HasSuffix(v.Name, "-provenance") && len(v.Spec.MatchConditions) == 1 {
				condition = v.Spec.MatchConditions[0].Expression
			}
		}
	}
	switch {
	case user == "":
		return errors.New("no manager Deployment")
	case condition == "":
		return errors.New("no provenance admission policy with one match condition")
	case condition != "request.userInfo.username != '"+user+"'":
		return fmt.Errorf("the provenance admission policy's condition %q does not let the manager, %s, through", condition, user)
	}
	return nil
}

// SamePolicyRules checks that two renderings (the chart's and config/'s)
// hold the same admission policies, by the last word of their names, with
// the same variables and validation expressions (their messages name
// each rendering's own objects): the chart's copy of a rule must not fall
// behind.
func SamePolicyRules(got, want []runtime.Object) error {
	policies := func(objs []runtime.Object) map[string]*admissionregistrationv1.ValidatingAdmissionPolicy {
		out := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
		for _, o := range objs {
			if v, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy); ok {
				out[v.Name[strings.LastIndexByte(v.Name, '-')+1:]] = v
			}
		}
		return out
	}
	g, w := policies(got), policies(want)
	if len(g) != len(w) {
		return fmt.Errorf("%d admission policies, want %d", len(g), len(w))
	}
	for name, wp := range w {
		gp := g[name]
		switch {
		case gp == nil:
			return fmt.Errorf("no %s admission policy", name)
		case !equality.Semantic.DeepEqual(gp.Spec.Variables, wp.Spec.Variables):
			return fmt.Errorf("the %s admission policy's variables differ:\n%+v\nwant\n%+v", name, gp.Spec.Variables, wp.Spec.Variables)
		case !slices.Equal(expressions(gp), expressions(wp)):
			return fmt.Errorf("the %s admission policy's validations differ:\n%q\nwant\n%q", name, expressions(gp), expressions(wp))
		}
	}
	return nil
}

func expressions(p *admissionregistrationv1.ValidatingAdmissionPolicy) []string {
	var out []string
	for _, v := range p.Spec.Validations {
		out = append(out, v.Expression)
	}
	return out
}
