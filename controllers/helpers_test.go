package controllers

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolcatalog/tool-catalog-operator/api/v1alpha1"
)

// rawJSON wraps a JSON document for spec.parameters.
func rawJSON(doc string) *apiextensionsv1.JSON {
	if !json.Valid([]byte(doc)) {
		panic("invalid JSON in test: " + doc)
	}
	return &apiextensionsv1.JSON{Raw: []byte(doc)}
}

// conditionOf returns the condition of the given type, or nil.
func conditionOf(obj interface{ GetConditions() *[]metav1.Condition }, condType string) *metav1.Condition {
	return meta.FindStatusCondition(*obj.GetConditions(), condType)
}

// expectCondition asserts a condition's status and reason.
func expectCondition(g Gomega, obj interface{ GetConditions() *[]metav1.Condition }, condType string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	c := conditionOf(obj, condType)
	g.Expect(c).NotTo(BeNil(), "condition %s missing", condType)
	g.Expect(c.Status).To(Equal(status), "condition %s status (message %q)", condType, c.Message)
	g.Expect(c.Reason).To(Equal(reason), "condition %s reason (message %q)", condType, c.Message)
	return c
}

// eventsFor lists the events regarding the named object in a namespace.
func eventsFor(g Gomega, namespace, name string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(k8sClient.List(context.Background(), list, client.InNamespace(namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// hasEvent reports whether events contain one of the type and reason.
func hasEvent(events []eventsv1.Event, eventType, reason string) *eventsv1.Event {
	for i := range events {
		if events[i].Type == eventType && events[i].Reason == reason {
			return &events[i]
		}
	}
	return nil
}

// getTD fetches a ToolDefinition into a fresh object.
func getTD(g Gomega, namespace, name string) *v1alpha1.ToolDefinition {
	td := &v1alpha1.ToolDefinition{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, td)).To(Succeed())
	return td
}

func gomegaFor(t *testing.T) *WithT {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(eventuallyTimeout)
	g.SetDefaultEventuallyPollingInterval(pollInterval)
	return g
}
