package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// RestrictedNamespace creates a namespace that enforces the Pod Security
// "restricted" profile, as deploy/instances' cache namespace does, and
// checks that the apiserver really enforces it there.
func RestrictedNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if err := c.Create(ctx, ns); err != nil {
		return err
	}
	// A real cluster creates "default" in every namespace; envtest runs no
	// controller that would.
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: name}}); err != nil {
		return err
	}
	privileged := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "x", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
	}}}}
	if err := PodAdmitted(ctx, c, name, privileged); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		return fmt.Errorf("namespace %s does not enforce Pod Security restricted: a privileged Pod got %w", name, err)
	}
	return nil
}

// PodAdmitted creates (as a server-side dry run) a Pod from a pod template:
// the apiserver validates it and runs every admission plugin on it (Pod
// Security, priority, service account, admission policies), as it would for
// the Pods a ReplicaSet creates.
func PodAdmitted(ctx context.Context, c client.Client, namespace string, template corev1.PodTemplateSpec) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "admission-check-", Namespace: namespace, Labels: template.Labels, Annotations: template.Annotations},
		Spec:       template.Spec,
	}
	if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
		return errors.Join(fmt.Errorf("a Pod from the template is rejected in %s", namespace), err)
	}
	return nil
}
