package controller

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/operator/internal/resources"
	"github.com/example/memcached-operator/operator/internal/secretcheck"
)

// secretNamesIndex indexes Memcacheds by the Secrets their spec.security
// names, so that a Secret's change reconciles exactly the Memcacheds that
// use it.
const secretNamesIndex = "spec.security.secretNames"

func secretNames(obj client.Object) []string {
	mc, ok := obj.(*cachev1alpha1.Memcached)
	if !ok || mc.Spec.Security == nil {
		return nil
	}
	var names []string
	if t := mc.Spec.Security.TLS; t != nil {
		names = append(names, t.SecretName)
	}
	if a := mc.Spec.Security.Auth; a != nil {
		names = append(names, a.SecretName)
	}
	return names
}

// memcachedsForSecret maps a Secret event to the Memcacheds naming it.
func (r *MemcachedReconciler) memcachedsForSecret(ctx context.Context, secret client.Object) []reconcile.Request {
	list := &cachev1alpha1.MemcachedList{}
	if err := r.List(ctx, list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{secretNamesIndex: secret.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// securityReport is what the Secrets of spec.security say.
type securityReport struct {
	// problem stops the operator from changing the pods: with a Secret
	// memcached cannot load, new pods would exit at start.
	problem *secretcheck.Problem
	cert    *secretcheck.Certificate
}

// checkSecurity reads the Secrets a Memcached's spec.security names from
// the apiserver (the cache holds only their metadata, so the operator
// keeps no Secret's content in memory) and checks them as memcached will
// load them.
func (r *MemcachedReconciler) checkSecurity(ctx context.Context, mc *cachev1alpha1.Memcached, now time.Time) (securityReport, error) {
	var rep securityReport
	sec := mc.Spec.Security
	if sec == nil {
		return rep, nil
	}
	if r.Defaults.ReloaderImage == "" {
		rep.problem = &secretcheck.Problem{Reason: cachev1alpha1.ReasonReloaderImageUnknown, Message: "spec.security needs the reloader sidecar, and this operator does not know its image: run it in a pod (POD_NAME and POD_NAMESPACE set from the downward API, as deploy/manager does) or with --reloader-image"}
		return rep, nil
	}
	read := func(name, field string) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: mc.Namespace, Name: name}, s)
		if apierrors.IsNotFound(err) {
			rep.problem = secretcheck.NotFound(mc.Namespace, name, field)
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read Secret %s/%s (%s): %w", mc.Namespace, name, field, err)
		}
		return s, nil
	}
	if t := sec.TLS; t != nil {
		s, err := read(t.SecretName, "spec.security.tls.secretName")
		if err != nil || s == nil {
			return rep, err
		}
		rep.cert, rep.problem = secretcheck.TLS(s, resources.ClientCertificates(t), now)
	}
	// The first problem is the one reported.
	if a := sec.Auth; a != nil && rep.problem == nil {
		s, err := read(a.SecretName, "spec.security.auth.secretName")
		if err != nil || s == nil {
			return rep, err
		}
		rep.problem = secretcheck.Auth(s)
	}
	return rep, nil
}

// recheckAfter is when the certificate's condition changes by the clock
// alone: when it starts expiring, then when it expires.
func (rep securityReport) recheckAfter(now time.Time) time.Duration {
	if rep.cert == nil {
		return 0
	}
	expiring := rep.cert.NotAfter.Add(-rep.cert.ExpiringWithin())
	if now.Before(expiring) {
		return expiring.Sub(now) + time.Second
	}
	return rep.cert.NotAfter.Sub(now) + time.Second
}

// summarizeSecurity writes status.tls and the CertificateExpiring and
// CertificateNamesMissing conditions.
func summarizeSecurity(mc *cachev1alpha1.Memcached, rep securityReport, now time.Time) {
	if mc.Spec.Security == nil || mc.Spec.Security.TLS == nil {
		mc.Status.TLS = nil
		meta.RemoveStatusCondition(&mc.Status.Conditions, cachev1alpha1.ConditionCertificateExpiring)
		meta.RemoveStatusCondition(&mc.Status.Conditions, cachev1alpha1.ConditionCertificateNamesMissing)
		return
	}
	if rep.cert == nil {
		// Keep what the pods still serve: a bad new Secret is not loaded.
		return
	}
	mc.Status.TLS = &rep.cert.Status
	cond := metav1.Condition{
		Type: cachev1alpha1.ConditionCertificateExpiring, Status: metav1.ConditionFalse,
		Reason: cachev1alpha1.ReasonAsExpected, ObservedGeneration: mc.Generation,
		Message: fmt.Sprintf("The certificate (serial %s) is valid until %s.", rep.cert.Status.SerialNumber, rep.cert.NotAfter.UTC().Format(time.RFC3339)),
	}
	if left := rep.cert.NotAfter.Sub(now); left < rep.cert.ExpiringWithin() {
		cond.Status, cond.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonCertificateExpiring
		cond.Message = fmt.Sprintf("The certificate in Secret %s (serial %s) expires at %s, in %s: renew it; the pods load the new one without a restart.",
			rep.cert.Status.SecretName, rep.cert.Status.SerialNumber, rep.cert.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Minute))
	}
	meta.SetStatusCondition(&mc.Status.Conditions, cond)
	meta.SetStatusCondition(&mc.Status.Conditions, certificateNames(mc, rep.cert))
}

// verifiedNames are the host names clients verify the certificate
// against: the Service's (status.endpoint) and, with identity Stable, each
// pod's of status.serverList, for every ordinal of spec.size, so a scale-up
// is named before its pods are ready. Ephemeral pods are listed by address,
// which no certificate issued ahead of them can hold: their clients verify
// the Service's name (docs/security.md).
func verifiedNames(mc *cachev1alpha1.Memcached) []string {
	host := func(hostPort string) string { h, _, _ := net.SplitHostPort(hostPort); return h }
	names := []string{host(mc.Endpoint())}
	if mc.GetIdentity() == cachev1alpha1.IdentityStable {
		for i := range mc.GetSize() {
			names = append(names, host(resources.StableServer(mc, fmt.Sprintf("%s-%d", mc.Name, i))))
		}
	}
	return names
}

// certificateNames is the CertificateNamesMissing condition: which of the
// verified names the certificate lacks, and what to add.
func certificateNames(mc *cachev1alpha1.Memcached, cert *secretcheck.Certificate) metav1.Condition {
	cond := metav1.Condition{
		Type: cachev1alpha1.ConditionCertificateNamesMissing, Status: metav1.ConditionFalse,
		Reason: cachev1alpha1.ReasonAsExpected, ObservedGeneration: mc.Generation,
		Message: "The certificate names the Service",
	}
	if mc.GetIdentity() == cachev1alpha1.IdentityStable {
		cond.Message += " and every pod of status.serverList"
	}
	cond.Message += "."
	missing := cert.Unnamed(verifiedNames(mc)...)
	if len(missing) == 0 {
		return cond
	}
	// The fix: the exact name for the Service, a wildcard of the Service's
	// domain for the pods (one certificate for every size).
	var add []string
	service, _, _ := net.SplitHostPort(mc.Endpoint())
	if missing[0] == service {
		add = append(add, service)
	}
	if len(missing) > len(add) {
		add = append(add, "*."+service)
	}
	shown := missing
	if len(shown) > 3 {
		shown = shown[:3]
	}
	list := strings.Join(shown, ", ")
	if more := len(missing) - len(shown); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, cachev1alpha1.ReasonCertificateNamesMissing
	cond.Message = fmt.Sprintf("The certificate in Secret %s (serial %s) does not name %s: clients that verify host names refuse those servers. Add %s to its DNS names (cert-manager: the Certificate's spec.dnsNames); the pods load the new one without a restart.",
		cert.Status.SecretName, cert.Status.SerialNumber, list, strings.Join(add, " and "))
	return cond
}
