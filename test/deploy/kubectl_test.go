package deploy

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	ssautils "github.com/fluxcd/pkg/ssa/utils"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/platform"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// The kubectl path of docs/deploy/kubectl.md, for real, for every environment: install the
// namespace, CRD and RBAC, then `kustomize build overlays/<env> | kubectl
// apply --server-side -f -` into a live apiserver whose namespaces enforce
// Pod Security "restricted". A second apply changes nothing. Then the
// manager runs as the rendered ServiceAccount (impersonated, with only the
// RBAC the overlay installed) through a whole Memcached lifecycle.
func TestKubectlDeployAndLeastPrivilege(t *testing.T) {
	bins, err := repo.Bin("kubectl", "kustomize", "manager")
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			c := cluster.StartEnvtest(t)
			manifests := buildCLI(t, "overlays/"+env)

			if env == "prod" {
				// cert-manager's CRDs and the password Secret.
				platform.Prepare(t, c.Kubeconfig)
			}
			cluster.Run(t, c.Kubeconfig, nil, bins["kubectl"], "apply", "--server-side", "-k", "deploy/install")
			out := cluster.Run(t, c.Kubeconfig, manifests, bins["kubectl"], "apply", "--server-side", "-f", "-")
			if strings.Contains(out, "Warning") {
				t.Errorf("kubectl warned (Pod Security?):\n%s", out)
			}
			before := resourceVersions(t, c, manifests)
			cluster.Run(t, c.Kubeconfig, manifests, bins["kubectl"], "apply", "--server-side", "-f", "-")
			if after := resourceVersions(t, c, manifests); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("the second apply changed objects:\nbefore %v\nafter  %v", before, after)
			}
			if out, err := cluster.TryRun(c.Kubeconfig, manifests, bins["kubectl"], "diff", "--server-side", "-f", "-"); err != nil {
				t.Errorf("kubectl diff finds a difference after apply: %v\n%s", err, out)
			}

			manager := &appsv1.Deployment{}
			get(t, c, names.OperatorNamespace, names.ManagerServiceAccount, manager)
			expectPodSecurityAdmits(t, c, names.OperatorNamespace, manager.Spec.Template)
			if env == "prod" {
				// After the idempotency checks: it writes the Secrets and
				// the Certificates' status.
				certmanager.Start(t, c.Kubeconfig)
			}

			lifecycleAsServiceAccount(t, c, bins["kubectl"])
		})
	}
}

func get(t *testing.T, c *cluster.Envtest, namespace, name string, obj client.Object) {
	t.Helper()
	if err := c.Client.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s/%s: %v", obj, namespace, name, err)
	}
}

// resourceVersions maps every rendered object to its resourceVersion.
func resourceVersions(t *testing.T, c *cluster.Envtest, manifests []byte) map[string]string {
	t.Helper()
	objects, err := ssautils.ReadObjects(bytes.NewReader(manifests))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range objects {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = live.GetResourceVersion()
	}
	return out
}

// expectPodSecurityAdmits checks that a Pod from the template is admitted
// in a namespace that enforces "restricted", and that enforcement is on.
func expectPodSecurityAdmits(t *testing.T, c *cluster.Envtest, namespace string, template corev1.PodTemplateSpec) {
	t.Helper()
	if err := cluster.PodAdmitted(context.Background(), c.Client, namespace, template); err != nil {
		t.Error(err)
	}
	bad := template.DeepCopy()
	bad.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	err := cluster.PodAdmitted(context.Background(), c.Client, namespace, *bad)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("namespace %s does not enforce Pod Security restricted: a privileged Pod got %v", namespace, err)
	}
}

// lifecycleAsServiceAccount runs bin/manager as the rendered
// ServiceAccount and takes the environment's Memcached through create,
// ready, scale, pause, resume and delete. Any Forbidden fails the test.
func lifecycleAsServiceAccount(t *testing.T, c *cluster.Envtest, kubectl string) {
	t.Helper()
	ctx := context.Background()
	asOperator := cluster.ImpersonatingKubeconfig(t, c.Kubeconfig, names.OperatorNamespace, names.ManagerServiceAccount)
	metrics := run.FreePort(t)
	// envtest has no pods to read the operator's image from: give it
	// the Deployment's, which its pods would have.
	manager := &appsv1.Deployment{}
	get(t, c, names.OperatorNamespace, names.ManagerServiceAccount, manager)
	mgr := cluster.StartManager(t, asOperator, "--reloader-image="+manager.Spec.Template.Spec.Containers[0].Image,
		"--leader-elect", "--leader-election-namespace="+names.OperatorNamespace,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metrics))
	// envtest runs no ServiceAccount controller; a real cluster creates
	// "default" in every namespace, and Pod admission needs it.
	if err := c.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: names.CacheNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	cache := &appsv1.Deployment{}
	cluster.Eventually(t, 60*time.Second, "the operator to create the app-cache Deployment", func() error {
		return c.Client.Get(ctx, types.NamespacedName{Namespace: names.CacheNamespace, Name: "app-cache"}, cache)
	})
	expectPodSecurityAdmits(t, c, names.CacheNamespace, cache.Spec.Template)
	cluster.MarkDeploymentReady(t, c.Client, names.CacheNamespace, "app-cache")
	waitForCondition(t, c, "Ready", "True", "")
	expectArgoHealth(t, c, "Healthy")

	cluster.Run(t, c.Kubeconfig, nil, kubectl, "scale", "memcached/app-cache", "-n", names.CacheNamespace, "--replicas=4")
	cluster.Eventually(t, 30*time.Second, "the Deployment to follow the scale", func() error {
		get(t, c, names.CacheNamespace, "app-cache", cache)
		if *cache.Spec.Replicas != 4 {
			return fmt.Errorf("replicas %d", *cache.Spec.Replicas)
		}
		return nil
	})
	cluster.MarkDeploymentReady(t, c.Client, names.CacheNamespace, "app-cache")
	waitForCondition(t, c, "Ready", "True", "")

	cluster.Run(t, c.Kubeconfig, nil, kubectl, "patch", "memcached/app-cache", "-n", names.CacheNamespace, "--type=merge", "-p", `{"spec":{"paused":true}}`)
	waitForCondition(t, c, "Progressing", "False", "Paused")
	expectArgoHealth(t, c, "Suspended")
	cluster.Run(t, c.Kubeconfig, nil, kubectl, "patch", "memcached/app-cache", "-n", names.CacheNamespace, "--type=merge", "-p", `{"spec":{"paused":false}}`)
	waitForCondition(t, c, "Ready", "True", "")

	scrapeMetrics(t, c, kubectl, metrics)

	lease := &coordinationv1.Lease{}
	get(t, c, names.OperatorNamespace, "memcached-operator.cache.example.com", lease)
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("the manager holds no leader election lease")
	}

	cluster.Run(t, c.Kubeconfig, nil, kubectl, "delete", "memcached/app-cache", "-n", names.CacheNamespace, "--wait", "--timeout=60s")
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		err := c.Client.Get(ctx, types.NamespacedName{Namespace: names.CacheNamespace, Name: "app-cache"}, obj)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%T app-cache survived the Memcached: %v", obj, err)
		}
	}

	if log := mgr.Log(); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("the manager hit RBAC denials as %s:\n%s", names.ManagerServiceAccount, log)
	}
}

// expectArgoHealth runs Argo CD's health check on the live Memcached, as
// the operator wrote its status.
func expectArgoHealth(t *testing.T, c *cluster.Envtest, want string) {
	t.Helper()
	mc := &unstructured.Unstructured{}
	mc.SetAPIVersion("cache.example.com/v1alpha1")
	mc.SetKind("Memcached")
	if err := c.Client.Get(context.Background(), types.NamespacedName{Namespace: names.CacheNamespace, Name: "app-cache"}, mc); err != nil {
		t.Fatal(err)
	}
	if got, msg := argoHealth(t, healthScript(t), mc.Object); got != want {
		t.Errorf("Argo CD health of the live Memcached: %s (%s), want %s", got, msg, want)
	}
}

func waitForCondition(t *testing.T, c *cluster.Envtest, condType, status, reason string) {
	t.Helper()
	cluster.Eventually(t, 30*time.Second, "app-cache "+condType+"="+status+" "+reason, func() error {
		mc, err := cluster.Memcached(c.Client, names.CacheNamespace, "app-cache")
		if err != nil {
			return err
		}
		return cluster.MemcachedCondition(mc, condType, status, reason)
	})
}

// scrapeMetrics reads the manager's HTTPS metrics: a token bound to the
// rendered metrics-reader role gets them, an anonymous request does not.
func scrapeMetrics(t *testing.T, c *cluster.Envtest, kubectl string, port int) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: "monitoring"}},
	} {
		if err := c.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cluster.Run(t, c.Kubeconfig, nil, kubectl, "create", "clusterrolebinding", "prometheus-metrics",
		"--clusterrole=memcached-operator-metrics-reader", "--serviceaccount=monitoring:prometheus")
	token := strings.TrimSpace(cluster.Run(t, c.Kubeconfig, nil, kubectl, "create", "token", "prometheus", "-n", "monitoring"))

	httpClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		// The manager serves a self-signed certificate, as kube-controller-manager does.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test against a self-signed server
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	scrape := func(token string) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	cluster.Eventually(t, 30*time.Second, "authorized metrics", func() error {
		code, body, err := scrape(token)
		switch {
		case err != nil:
			return err
		case code != http.StatusOK:
			return fmt.Errorf("status %d: %s", code, body)
		case !strings.Contains(body, `controller_runtime_reconcile_total{controller="memcached"`):
			return fmt.Errorf("no reconcile metrics in %d bytes", len(body))
		}
		return nil
	})
	if code, _, err := scrape(""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("an anonymous scrape got %d (%v), want 401", code, err)
	}
}
