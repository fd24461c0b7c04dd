//go:build !unit

package metricsauth

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A real kube-apiserver answers the reviews: its TokenRequest API issues the
// ServiceAccount tokens and RBAC decides the access, as in a cluster.
func TestGuardAgainstARealAPIServer(t *testing.T) {
	cfg := startAPIServer(t)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := NewWithT(t)
	const ns = "default"
	for _, sa := range []string{"prometheus", "nobody"} {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
	}
	// What deploy/rbac/metrics_reader_role.yaml grants, bound to one of them.
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	token := func(sa string) string {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}

	// As the metrics server calls it: with the manager's HTTP client.
	httpClient, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	filter, err := WithAuthenticationAndAuthorization(cfg, httpClient)
	g.Expect(err).NotTo(HaveOccurred())
	handler, err := filter(testr.New(t), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") }))
	g.Expect(err).NotTo(HaveOccurred())
	get := func(path, authorization string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}

	prometheus, nobody := token("prometheus"), token("nobody")
	tests := []struct {
		name, path, authorization string
		code                      int
		body                      string
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized, "Unauthorized"},
		{"not a bearer token", "/metrics", "Basic " + prometheus, http.StatusUnauthorized, "Unauthorized"},
		{"a token the apiserver does not accept", "/metrics", "Bearer not-a-token", http.StatusUnauthorized, "Unauthorized"},
		{"a valid token without the role", "/metrics", "Bearer " + nobody, http.StatusForbidden, "Authorization denied for user system:serviceaccount:default:nobody"},
		{"a valid token with the role", "/metrics", "Bearer " + prometheus, http.StatusOK, "metrics"},
		{"the role covers /metrics only", "/debug/pprof/", "Bearer " + prometheus, http.StatusForbidden, "Authorization denied"},
		{"the answer is cached and still right", "/metrics", "Bearer " + prometheus, http.StatusOK, "metrics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(tt.path, tt.authorization)
			g := NewWithT(t)
			g.Expect(code).To(Equal(tt.code), body)
			g.Expect(body).To(ContainSubstring(tt.body))
		})
	}
}

func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "bin")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(abs, b)); err != nil {
			t.Fatalf("this test needs %s in %s: run `make tools` first (it builds the control plane from the Go module proxy)", b, abs)
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: abs}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest from %s: %v", abs, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}
