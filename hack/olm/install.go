package olm

import (
	"fmt"
	"slices"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// CatalogSourceNamespace is upstream OLM's global catalog namespace:
	// a CatalogSource there serves Subscriptions in every namespace.
	// OpenShift's is openshift-marketplace.
	CatalogSourceNamespace = "olm"
	// InstallNamespace is where the Subscription installs the operator,
	// as deploy/ installs it.
	InstallNamespace = "memcached-operator-system"
)

// installMode is the OperatorGroup's: every namespace, as deploy/ runs
// the operator (one OperatorGroup without targetNamespaces).
const installMode = operatorsv1alpha1.InstallModeTypeAllNamespaces

// Install is what a cluster with OLM needs to run the release in the
// catalog image: the CatalogSource serving it, the install namespace with
// its OperatorGroup, and the Subscription to the package's channel,
// starting at this bundle's CSV, in the order to apply them. catalogImage
// should be pinned by digest (make olm-publish pins what it pushed).
func Install(b *Bundle, catalogImage string) ([]any, error) {
	supported := slices.ContainsFunc(b.CSV.Spec.InstallModes, func(m operatorsv1alpha1.InstallMode) bool {
		return m.Type == installMode && m.Supported
	})
	if !supported {
		return nil, fmt.Errorf("the CSV %s does not support the install mode %s its OperatorGroup selects", b.CSV.Name, installMode)
	}
	source := &operatorsv1alpha1.CatalogSource{
		TypeMeta:   metav1.TypeMeta{APIVersion: operatorsv1alpha1.SchemeGroupVersion.String(), Kind: operatorsv1alpha1.CatalogSourceKind},
		ObjectMeta: metav1.ObjectMeta{Name: Package, Namespace: CatalogSourceNamespace},
		Spec: operatorsv1alpha1.CatalogSourceSpec{
			SourceType:  operatorsv1alpha1.SourceTypeGrpc,
			Image:       catalogImage,
			DisplayName: b.CSV.Spec.DisplayName,
			Publisher:   b.CSV.Spec.Provider.Name,
		},
	}
	namespace := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: InstallNamespace},
	}
	group := &operatorsv1.OperatorGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: operatorsv1.SchemeGroupVersion.String(), Kind: operatorsv1.OperatorGroupKind},
		ObjectMeta: metav1.ObjectMeta{Name: Package, Namespace: InstallNamespace},
		// No targetNamespaces: AllNamespaces.
	}
	subscription := &operatorsv1alpha1.Subscription{
		TypeMeta:   metav1.TypeMeta{APIVersion: operatorsv1alpha1.SchemeGroupVersion.String(), Kind: operatorsv1alpha1.SubscriptionKind},
		ObjectMeta: metav1.ObjectMeta{Name: Package, Namespace: InstallNamespace},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource:          source.Name,
			CatalogSourceNamespace: source.Namespace,
			Package:                Package,
			Channel:                Channel,
			StartingCSV:            b.CSV.Name,
			// Automatic: each release the catalog adds to the channel is
			// installed as it is published; Manual waits for someone to
			// approve each InstallPlan.
			InstallPlanApproval: operatorsv1alpha1.ApprovalAutomatic,
		},
	}
	return []any{source, namespace, group, subscription}, nil
}
