package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/guide"
	"github.com/example/memcached-operator/test/internal/names"
)

// deleteWhatGitOpsLeaves checks that a GitOps removal (Argo CD's or
// Flux's) left the CRD and both namespaces, which no sync or prune
// deletes, and no Memcached; then deletes them with the commands of
// docs/deploy/uninstall.md, verbatim, and checks they are gone.
func deleteWhatGitOpsLeaves(t *testing.T, c client.Client, kubeconfig string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cluster.Memcached(c, "cache", "app-cache"); !apierrors.IsNotFound(err) {
		t.Errorf("Memcached app-cache after the removal: %v", err)
	}
	crd := types.NamespacedName{Name: "memcacheds.cache.example.com"}
	if err := c.Get(ctx, crd, crdObject()); err != nil {
		t.Errorf("the CRD did not outlive the removal: %v", err)
	}
	namespaces := []string{"cache", names.OperatorNamespace}
	for _, name := range namespaces {
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &corev1.Namespace{}); err != nil {
			t.Errorf("namespace %s did not outlive the removal: %v", name, err)
		}
	}
	guide.Run(t, kubeconfig, "docs/deploy/uninstall.md", "kubectl delete customresourcedefinition")
	if err := c.Get(ctx, crd, crdObject()); !apierrors.IsNotFound(err) {
		t.Errorf("the CRD after the guide deleted it: %v", err)
	}
	for _, name := range namespaces {
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			t.Errorf("namespace %s after the guide deleted it: %v", name, err)
		}
	}
}

// crdObject is an empty CustomResourceDefinition to read into.
func crdObject() *unstructured.Unstructured {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	return crd
}
