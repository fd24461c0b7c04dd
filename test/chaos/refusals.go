package chaos

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/load"
	"github.com/example/memcached-operator/test/internal/names"
)

// backoffRetries is how many times controller-runtime's default per-object
// back-off (5ms doubling, capped at 1000s) retries a failing reconcile in
// window: the bound a failing Memcached's reconciles must stay under.
func backoffRetries(window time.Duration) int {
	return int(math.Ceil(math.Log2(window.Seconds()/0.005 + 1)))
}

// PermissionResult is scenario 4: a verb taken from the manager's
// ClusterRole while it runs.
type PermissionResult struct {
	CRs     int
	Removed string
	// ReportedAfter: from the spec change that needs the verb until every
	// affected Memcached shows Degraded with the apiserver's 403.
	ReportedAfter time.Duration
	Message       string
	Window        time.Duration
	// Over the window: reconciles per affected Memcached (and the back-off
	// bound), requests, and requests per second in its last quarter.
	ReconcilesPerCR  float64
	BackoffBound     int
	Requests         int
	TailRPS          float64
	HealedAfter      time.Duration
	ManagerRestarted bool
	Problems         []string
}

// LostPermission runs scenario 4: patch on Deployments is removed, every
// Memcached is scaled, and the verb is given back.
func LostPermission(sc Scale, progress func(string, ...any)) (r PermissionResult, err error) {
	r.CRs, r.Window, r.Removed = sc.PermissionCRs, sc.PermissionWindow, "patch on apps/deployments"
	const ns = "permissions"
	env, err := NewEnv("permissions", EnvOptions{Pods: r.CRs * 2}, progress)
	if err != nil {
		return r, err
	}
	defer closeEnv(env, &err)
	m, err := env.StartManager("manager-a", "")
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conv, err := env.Converge(ctx, m, ns, r.CRs, 1, sc.Timeout)
	if err != nil {
		return r, err
	}

	restore, err := env.removeVerb("apps", "deployments", "patch")
	if err != nil {
		return r, err
	}
	env.progress("permissions: removed %s; scaling %d Memcacheds to 2", r.Removed, r.CRs)
	before, err := m.Metrics()
	if err != nil {
		return r, err
	}
	start := time.Now()
	for i := range r.CRs {
		if err := env.scale(ns, memcachedName("mc", i), 2); err != nil {
			return r, err
		}
	}
	// Every Memcached must say why it cannot progress.
	deadline := start.Add(sc.Timeout)
	for i := 0; i < r.CRs; {
		mc, err := cluster.Memcached(env.Admin, ns, memcachedName("mc", i))
		if err == nil && cluster.MemcachedCondition(mc, "Degraded", "True", "Forbidden") == nil {
			if r.Message == "" {
				r.Message = degradedField(mc, "message")
			}
			i++
			continue
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the Memcached %s does not report the lost permission: %s", memcachedName("mc", i), fmt.Sprint(err))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.ReportedAfter = time.Since(start)
	if !strings.Contains(r.Message, "forbidden") || !strings.Contains(r.Message, "patch") {
		r.Problems = append(r.Problems, fmt.Sprintf("the Degraded message does not carry the apiserver's 403: %q", r.Message))
	}
	time.Sleep(time.Until(start.Add(r.Window)))
	end := time.Now()
	after, err := m.Metrics()
	if err != nil {
		return r, err
	}
	r.ReconcilesPerCR = (after.Reconciles() - before.Reconciles()) / float64(r.CRs)
	r.BackoffBound = backoffRetries(r.Window)
	r.Requests = m.Requests(start, end)
	r.TailRPS, _ = m.RequestRate(end.Add(-r.Window/4), end)
	// The spec change and the Deployment's own events may add a reconcile
	// or two to the back-off's retries.
	if r.ReconcilesPerCR > float64(r.BackoffBound+3) {
		r.Problems = append(r.Problems, fmt.Sprintf("%.1f reconciles per Memcached in %v without the permission: more than the back-off's %d retries",
			r.ReconcilesPerCR, r.Window, r.BackoffBound))
	}
	env.progress("permissions: reported after %v; %.1f reconciles per Memcached in %v (back-off bound %d), %.2f requests/s at the end",
		r.ReportedAfter.Round(time.Millisecond), r.ReconcilesPerCR, r.Window, r.BackoffBound, r.TailRPS)

	restored := time.Now()
	if err := restore(); err != nil {
		return r, err
	}
	if err := conv.Wait(sc.Timeout); err != nil {
		return r, fmt.Errorf("after the verb was restored: %w", err)
	}
	r.HealedAfter = time.Since(restored)
	exited, _ := m.current().Exited()
	r.ManagerRestarted = exited || len(m.Exits()) > 0
	if r.ManagerRestarted {
		r.Problems = append(r.Problems, "the manager exited")
	}
	env.progress("permissions: healed %v after the verb was restored, without a restart", r.HealedAfter.Round(time.Millisecond))
	r.Problems = append(r.Problems, env.nothingLost(ns, r.CRs)...)
	return r, nil
}

// removeVerb takes a verb from the manager's ClusterRole rule for a
// resource, and returns how to give it back.
func (e *Env) removeVerb(group, resource, verb string) (func() error, error) {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{}
	if err := e.Admin.Get(ctx, types.NamespacedName{Name: names.ManagerRole}, role); err != nil {
		return nil, err
	}
	original := role.DeepCopy()
	found := false
	for i, rule := range slices.Clone(role.Rules) {
		if !slices.Contains(rule.APIGroups, group) || !slices.Contains(rule.Resources, resource) || !slices.Contains(rule.Verbs, verb) {
			continue
		}
		without := slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
		if len(rule.Resources) == 1 {
			role.Rules[i].Verbs = without
		} else {
			// A rule shared with other resources (controller-gen merges
			// rules with the same verbs) is split: the others keep it
			// whole, resource gets its own rule without the verb.
			role.Rules[i].Resources = slices.DeleteFunc(slices.Clone(rule.Resources), func(r string) bool { return r == resource })
			role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: rule.APIGroups, Resources: []string{resource}, Verbs: without})
		}
		found = true
	}
	if !found {
		return nil, fmt.Errorf("ClusterRole %s grants no %s on %s", names.ManagerRole, verb, resource)
	}
	if err := e.Admin.Update(ctx, role); err != nil {
		return nil, err
	}
	return func() error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &rbacv1.ClusterRole{}
			if err := e.Admin.Get(ctx, types.NamespacedName{Name: names.ManagerRole}, cur); err != nil {
				return err
			}
			cur.Rules = original.Rules
			return e.Admin.Update(ctx, cur)
		})
	}, nil
}

// scale sets a Memcached's spec.size, as `kubectl scale` does.
func (e *Env) scale(ns, name string, size int) error {
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cache.example.com/v1alpha1")
	mc.SetKind("Memcached")
	mc.SetNamespace(ns)
	mc.SetName(name)
	patch := fmt.Appendf(nil, `{"spec":{"size":%d}}`, size)
	return e.Admin.Patch(context.Background(), mc, client.RawPatch(types.MergePatchType, patch))
}

// degradedField is one field ("status", "message") of a Memcached's
// Degraded condition, "" when it has none.
func degradedField(mc *unstructured.Unstructured, field string) string {
	conditions, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
	for _, raw := range conditions {
		if cond, ok := raw.(map[string]any); ok && cond["type"] == "Degraded" {
			v, _ := cond[field].(string)
			return v
		}
	}
	return ""
}

// AdmissionResult is scenario 5: a ValidatingAdmissionPolicy refuses the
// memcached pods.
type AdmissionResult struct {
	// ReportedAfter runs from the Memcached's creation until it shows
	// Degraded with the policy's message; ReconcilesToReport are the
	// reconciles between the Deployment reporting the refusal and the
	// Memcached reporting it.
	ReportedAfter      time.Duration
	ReconcilesToReport float64
	Message            string
	Window             time.Duration
	// Over the window after the report: reconciles and requests.
	ReconcilesInWindow float64
	RequestsInWindow   int
	HealedAfter        time.Duration
	Problems           []string
}

const policyMessage = "chaos: memcached pods are refused by policy"

// AdmissionRejection runs scenario 5.
func AdmissionRejection(sc Scale, progress func(string, ...any)) (r AdmissionResult, err error) {
	r.Window = sc.AdmissionWindow
	const ns, name = "admission", "refused"
	env, err := NewEnv("admission", EnvOptions{Pods: 3}, progress)
	if err != nil {
		return r, err
	}
	defer closeEnv(env, &err)
	if err := env.CreateNamespace(ns); err != nil {
		return r, err
	}
	removePolicy, err := env.refuseMemcachedPods(ns)
	if err != nil {
		return r, err
	}
	m, _, err := env.StartLeader("manager-a", "")
	if err != nil {
		return r, err
	}
	ctx := context.Background()
	created := time.Now()
	if err := env.Admin.Create(ctx, load.Memcached(ns, name, 1)); err != nil {
		return r, err
	}
	var atDeploymentReport float64 = -1
	deadline := created.Add(sc.Timeout)
	for {
		if atDeploymentReport < 0 && env.deploymentReplicaFailure(ns, name) {
			if s, err := m.Metrics(); err == nil {
				atDeploymentReport = s.Reconciles()
			}
		}
		mc, err := cluster.Memcached(env.Admin, ns, name)
		if err == nil && cluster.MemcachedCondition(mc, "Degraded", "True", "ReplicaFailure") == nil {
			r.ReportedAfter = time.Since(created)
			r.Message = degradedField(mc, "message")
			if s, err := m.Metrics(); err == nil && atDeploymentReport >= 0 {
				r.ReconcilesToReport = s.Reconciles() - atDeploymentReport
			}
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the Memcached does not report the refused pods: %s", fmt.Sprint(err))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(r.Message, policyMessage) {
		r.Problems = append(r.Problems, fmt.Sprintf("the Degraded message does not carry the policy's: %q", r.Message))
	}
	before, err := m.Metrics()
	if err != nil {
		return r, err
	}
	start := time.Now()
	time.Sleep(r.Window)
	after, err := m.Metrics()
	if err != nil {
		return r, err
	}
	r.ReconcilesInWindow = after.Reconciles() - before.Reconciles()
	r.RequestsInWindow = m.Requests(start, time.Now())
	if r.ReconcilesInWindow > float64(backoffRetries(r.Window)) {
		r.Problems = append(r.Problems, fmt.Sprintf("%.0f reconciles in %v while the pods were refused: a loop", r.ReconcilesInWindow, r.Window))
	}
	env.progress("admission: reported after %v (%.0f reconciles after the Deployment's report); %.0f reconciles, %d requests in the next %v",
		r.ReportedAfter.Round(time.Millisecond), r.ReconcilesToReport, r.ReconcilesInWindow, r.RequestsInWindow, r.Window)

	removed := time.Now()
	if err := removePolicy(); err != nil {
		return r, err
	}
	cluster.QuietClientLogs()
	for {
		mc, err := cluster.Memcached(env.Admin, ns, name)
		if err == nil && Converged(mc) {
			break
		}
		if time.Since(removed) > sc.Timeout {
			return r, fmt.Errorf("the Memcached did not heal after the policy was removed: %s", fmt.Sprint(err))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.HealedAfter = time.Since(removed)
	env.progress("admission: healed %v after the policy was removed", r.HealedAfter.Round(time.Millisecond))
	return r, nil
}

// deploymentReplicaFailure tells whether the Deployment reports that it
// cannot create pods.
func (e *Env) deploymentReplicaFailure(ns, name string) bool {
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	if err := e.Admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(d.Object, "status", "conditions")
	for _, raw := range conditions {
		if c, ok := raw.(map[string]any); ok && c["type"] == "ReplicaFailure" && c["status"] == "True" {
			return true
		}
	}
	return false
}

// refuseMemcachedPods installs a ValidatingAdmissionPolicy that refuses
// memcached pods in the namespace, waits until the apiserver enforces it,
// and returns how to remove it.
func (e *Env) refuseMemcachedPods(ns string) (func() error, error) {
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-refuse-memcached-pods"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !(%q in object.metadata.labels) || object.metadata.labels[%q] != 'memcached'", labelName, labelName),
				Message:    policyMessage,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "chaos-refuse-memcached-pods"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
			}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := e.Admin.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	// The apiserver loads policies asynchronously: probe with a dry run.
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: map[string]string{labelName: "memcached"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := e.Admin.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), policyMessage) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the admission policy is not enforced after a minute: %s", fmt.Sprint(err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return func() error { return e.Admin.Delete(ctx, binding) }, nil
}
