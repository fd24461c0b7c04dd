package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	buildcluster "github.com/example/memcached-operator/hack/cluster"
	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
	"github.com/example/memcached-operator/test/internal/certmanager"
	"github.com/example/memcached-operator/test/internal/cluster"
	"github.com/example/memcached-operator/test/internal/memcached"
	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/platform"
	"github.com/example/memcached-operator/test/internal/repo"
	"github.com/example/memcached-operator/test/internal/run"
)

// securedCacheOnRealNodes runs prod's cache on the real nodes: the
// instances of overlays/prod (TLS with client certificates required, from
// the cert-manager component; passwords; the exporter), with the nodes'
// images in place of the registry's. An application pod mounting the
// component's client certificate and the password reaches it by the
// Service's name (memcached-cli); a client holding them reaches every
// endpoint of the Service's "memcached" port; one without a certificate, and plaintext,
// are refused; the exporter reports memcached_up 1 through the reloader.
// Then the certificate is renewed and the password rotated: the kubelet
// updates the mounted Secrets, the reloaders (the operator's own image)
// load them, every pod serves the new certificate and password, every key
// is kept, and no container restarts.
func securedCacheOnRealNodes(t *testing.T, k *cluster.Local, c client.Client, images buildcluster.Images) {
	t.Helper()
	ctx := context.Background()
	bins, err := repo.Bin("kubectl", "kustomize")
	if err != nil {
		t.Fatal(err)
	}
	platform.Prepare(t, k.Kubeconfig)
	certmanager.Start(t, k.Kubeconfig)

	// prod's instances, with the images the nodes hold (nothing can be
	// pulled here).
	stdout, stderr, code := run.Command(t, nil, bins["kustomize"], "build", filepath.Join(repo.MustRoot(t), "overlays", "prod", "instances"))
	if code != 0 {
		t.Fatalf("kustomize build overlays/prod/instances: %s", stderr)
	}
	var docs []string
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(stdout), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		if obj.GetKind() == "Memcached" {
			_ = unstructured.SetNestedField(obj.Object, images.Memcached, "spec", "image")
			_ = unstructured.SetNestedField(obj.Object, images.Exporter, "spec", "monitoring", "exporter", "image")
		}
		doc, _ := sigsyaml.Marshal(obj.Object)
		docs = append(docs, string(doc))
	}
	start := time.Now()
	cluster.Run(t, k.Kubeconfig, []byte(strings.Join(docs, "---\n")), bins["kubectl"], "apply", "--server-side", "--force-conflicts", "-f", "-")
	cluster.WaitMemcachedReady(t, c, names.CacheNamespace, "app-cache", 3)
	t.Logf("prod's secured app-cache 3/3 Ready on real nodes %v after apply (certificates issued, TLS, auth, reloader and exporter sidecars)", time.Since(start).Round(time.Millisecond))

	// The client's side: the component's client certificate and the
	// password, as an application would mount them.
	clientSecret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: names.CacheNamespace, Name: "app-cache-client"}, clientSecret); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(clientSecret.Data["tls.crt"], clientSecret.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(clientSecret.Data["ca.crt"])
	withCert := &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: roots, ServerName: "app-cache.cache.svc", MinVersion: tls.VersionTLS12}
	withoutCert := &tls.Config{RootCAs: roots, ServerName: "app-cache.cache.svc", MinVersion: tls.VersionTLS12}
	user, password := platform.Credentials(t, c)
	credentials := &memcached.Credentials{User: user, Password: password}
	// exchange sends one command and returns the answer's first line and
	// the serial of the certificate the server presented.
	exchange := func(addr string, cfg *tls.Config, creds *memcached.Credentials, cmd string) (answer, serial string, err error) {
		dialCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn, err := memcached.DialClient(dialCtx, addr, cfg, creds)
		if err != nil {
			return "", "", err
		}
		defer func() { _ = conn.Close() }()
		if tc, ok := conn.(*tls.Conn); ok {
			serial = fmt.Sprintf("%X", tc.ConnectionState().PeerCertificates[0].SerialNumber)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(conn, cmd); err != nil {
			return "", serial, err
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		return strings.TrimSpace(line), serial, err
	}

	// Every endpoint of the Service's memcached port is a TLS listener
	// that wants a client certificate and a password.
	endpoints := serviceEndpoints(t, c, names.CacheNamespace, "app-cache", "memcached")
	if len(endpoints) != 3 {
		t.Fatalf("the Service's memcached port has endpoints %v, want 3", endpoints)
	}
	serials := map[string]string{}
	for i, addr := range endpoints {
		got, serial, err := exchange(addr, withCert, credentials, fmt.Sprintf("set key-%d 0 0 5\r\nvalue\r\n", i))
		if err != nil || got != "STORED" {
			t.Fatalf("%s with the client certificate and the password: %q, %v", addr, got, err)
		}
		serials[addr] = serial
		if got, _, err := exchange(addr, withoutCert, credentials, "version\r\n"); err == nil && strings.HasPrefix(got, "VERSION") {
			t.Errorf("%s served a client without a certificate", addr)
		}
		if got, err := memcachedVersion(addr); err == nil {
			t.Errorf("%s answered plaintext: %q", addr, got)
		}
		if got, _, err := exchange(addr, withCert, &memcached.Credentials{User: user, Password: "wrong"}, "version\r\n"); err == nil && strings.HasPrefix(got, "VERSION") {
			t.Errorf("%s served a wrong password", addr)
		}
	}
	// An application pod, as docs/security.md tells one to: it mounts the
	// component's client certificate and the password, and reaches the
	// cache by its Service's name (memcached-cli, the Go example).
	// It carries the label deploy/cache-namespace's NetworkPolicy admits.
	app := cliPod{namespace: names.CacheNamespace, server: "app-cache.cache.svc:11211",
		labels:  map[string]string{"cache.example.com/client": "true"},
		secrets: map[string]string{"app-cache-client": "/etc/cache-client", platform.AuthSecret: "/etc/cache-auth"}}
	secured := []string{"-tls-dir", "/etc/cache-client", "-auth-file", "/etc/cache-auth/auth-file"}
	if got := memcachedCLI(t, k, c, images.Client, app, append(secured, "set", "greeting", "hello")...); got != "STORED" {
		t.Fatalf("memcached-cli with the client certificate and the password, through app-cache.cache.svc: %q", got)
	}
	if got := memcachedCLI(t, k, c, images.Client, app, append(secured, "get", "greeting")...); got != "hello" {
		t.Fatalf("memcached-cli get through app-cache.cache.svc: %q, want hello", got)
	}
	before := cachePods(t, c)
	for _, p := range before {
		if metrics := scrape(t, "http://"+net.JoinHostPort(p.Status.PodIP, "9150")+"/metrics"); !strings.Contains(metrics, "\nmemcached_up 1\n") {
			t.Errorf("pod %s's exporter does not report memcached_up 1 through the reloader", p.Name)
		}
	}

	// Renewal, as `cmctl renew` asks for it: cert-manager writes a new
	// certificate and key into the Secret; the kubelet updates the volume
	// on its next sync of each pod; the reloader loads it.
	renewed := time.Now()
	if err := certmanager.Renew(ctx, k.Kubeconfig, names.CacheNamespace, "app-cache-tls"); err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	for i, addr := range endpoints {
		cluster.Eventually(t, 4*time.Minute, addr+" to present the renewed certificate", func() error {
			got, serial, err := exchange(addr, withCert, credentials, fmt.Sprintf("get key-%d\r\n", i))
			if err != nil {
				return err
			}
			if serial == serials[addr] {
				return fmt.Errorf("still serial %s", serial)
			}
			if got != fmt.Sprintf("VALUE key-%d 0 5", i) {
				t.Fatalf("%s after the renewal: get key-%d = %q: the key was lost", addr, i, got)
			}
			return nil
		})
		slowest = max(slowest, time.Since(renewed))
	}
	t.Logf("certificate renewal: every pod served the new certificate within %v (kubelet Secret sync plus the reloader), every key kept", slowest.Round(time.Second))

	// Password rotation: the secret manager writes the new file.
	auth := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: names.CacheNamespace, Name: platform.AuthSecret}, auth); err != nil {
		t.Fatal(err)
	}
	rotatedCredentials := &memcached.Credentials{User: user, Password: "rotated-password"}
	auth.Data["auth-file"] = []byte(rotatedCredentials.User + ":" + rotatedCredentials.Password + "\n")
	if err := c.Update(ctx, auth); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	slowest = 0
	for i, addr := range endpoints {
		cluster.Eventually(t, 4*time.Minute, addr+" to accept the rotated password", func() error {
			got, _, err := exchange(addr, withCert, rotatedCredentials, fmt.Sprintf("get key-%d\r\n", i))
			if err != nil {
				return err
			}
			if got != fmt.Sprintf("VALUE key-%d 0 5", i) {
				t.Fatalf("%s after the password rotation: get key-%d = %q: the key was lost", addr, i, got)
			}
			return nil
		})
		slowest = max(slowest, time.Since(rotated))
		if got, _, err := exchange(addr, withCert, credentials, "version\r\n"); err == nil && strings.HasPrefix(got, "VERSION") {
			t.Errorf("%s still accepts the removed password", addr)
		}
	}
	t.Logf("password rotation: every pod accepted the new password within %v, the old one refused, every key kept", slowest.Round(time.Second))

	// Neither rotation restarted or replaced anything.
	after := cachePods(t, c)
	for name, p := range before {
		now, ok := after[name]
		if !ok || now.UID != p.UID {
			t.Errorf("pod %s was replaced during the rotations", name)
			continue
		}
		for _, s := range now.Status.ContainerStatuses {
			if s.RestartCount != 0 {
				t.Errorf("pod %s container %s restarted %d times during the rotations", name, s.Name, s.RestartCount)
			}
		}
	}

	hostNamesVerified(t, k, c, images, withCert, func(addr string, cfg *tls.Config, creds *memcached.Credentials, cmd string) (string, error) {
		answer, _, err := exchange(addr, cfg, creds, cmd)
		return answer, err
	}, rotatedCredentials)

	cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "delete", "-n", names.CacheNamespace, "memcached/app-cache", "--wait", "--timeout=60s")
}

// hostNamesVerified: a client that verifies host names, as TLS clients do
// by default, reads and writes through status.serverList with either
// identity (docs/security.md#host-names). prod's Ephemeral app-cache lists
// pod addresses, which its clients verify as the Service's name; a client
// that verifies the address itself is refused, which is why. A Stable
// cache lists pod names, each resolved through the cluster's DNS and
// verified as itself, under its certificate's *.NAME.cache.svc. Both
// report CertificateNamesMissing False.
func hostNamesVerified(t *testing.T, k *cluster.Local, c client.Client, images buildcluster.Images, withCert *tls.Config,
	exchange func(addr string, cfg *tls.Config, creds *memcached.Credentials, cmd string) (string, error), creds *memcached.Credentials) {
	t.Helper()
	ctx := context.Background()
	bins, err := repo.Bin("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	// serverList is a Memcached's status.serverList, once its certificate
	// names every server in it.
	serverList := func(name string) []string {
		t.Helper()
		mc, err := cluster.Memcached(c, names.CacheNamespace, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := cluster.MemcachedCondition(mc, cachev1alpha1.ConditionCertificateNamesMissing, string(metav1.ConditionFalse), ""); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		servers, _, _ := unstructured.NestedStringSlice(mc.Object, "status", "serverList")
		return servers
	}

	ephemeral := serverList("app-cache")
	if len(ephemeral) != 3 {
		t.Fatalf("app-cache's status.serverList is %v, want 3 servers", ephemeral)
	}
	for i, server := range ephemeral {
		asService := withCert.Clone()
		asService.ServerName = "app-cache.cache.svc"
		if got, err := exchange(server, asService, creds, fmt.Sprintf("set listed-%d 0 0 2\r\nok\r\n", i)); err != nil || got != "STORED" {
			t.Errorf("%s of app-cache's status.serverList, verified as app-cache.cache.svc: %q, %v", server, got, err)
		}
		address, _, _ := net.SplitHostPort(server)
		asAddress := withCert.Clone()
		asAddress.ServerName = address
		var hostErr x509.HostnameError
		if _, err := exchange(server, asAddress, creds, "version\r\n"); !errors.As(err, &hostErr) {
			t.Errorf("%s verified as its own address: %v, want the host name refused (no certificate issued ahead of a pod names its address)", server, err)
		}
	}

	// A Stable cache with its own server certificate from prod's CA.
	const name = "named-cache"
	service := name + "." + names.CacheNamespace + ".svc"
	crt := &cmapi.Certificate{
		TypeMeta:   metav1.TypeMeta{APIVersion: cmapi.SchemeGroupVersion.String(), Kind: cmapi.CertificateKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: names.CacheNamespace, Name: name + "-tls"},
		Spec: cmapi.CertificateSpec{
			SecretName: name + "-tls",
			DNSNames:   []string{service, "*." + service},
			Usages:     []cmapi.KeyUsage{cmapi.UsageServerAuth, cmapi.UsageDigitalSignature},
			PrivateKey: &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: 256},
			IssuerRef:  cmmeta.IssuerReference{Kind: cmapi.IssuerKind, Name: "cache-ca"},
		},
	}
	stable := &cachev1alpha1.Memcached{
		TypeMeta:   metav1.TypeMeta{APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Namespace: names.CacheNamespace, Name: name},
		Spec: cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](3), Image: images.Memcached, Identity: cachev1alpha1.IdentityStable,
			Security: &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: name + "-tls", ClientCertificates: cachev1alpha1.ClientCertificatesRequire}},
		},
	}
	var manifests []string
	for _, obj := range []any{crt, stable} {
		doc, err := sigsyaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		manifests = append(manifests, string(doc))
	}
	cluster.Run(t, k.Kubeconfig, []byte(strings.Join(manifests, "---\n")), bins["kubectl"], "apply", "--server-side", "-f", "-")
	cluster.WaitMemcachedReady(t, c, names.CacheNamespace, name, 3)
	listed := serverList(name)
	if len(listed) != 3 {
		t.Fatalf("%s's status.serverList is %v, want 3 servers", name, listed)
	}
	resolver := clusterResolver(t, c)
	for i, server := range listed {
		host, port, _ := net.SplitHostPort(server)
		if !strings.HasSuffix(host, "."+service) {
			t.Fatalf("%s's status.serverList holds %s, want pod names under %s", name, server, service)
		}
		var addrs []string
		cluster.Eventually(t, time.Minute, host+" to resolve in the cluster's DNS", func() error {
			addrs, err = resolver.LookupHost(ctx, host+"."+buildcluster.ClusterDomain)
			return err
		})
		asListed := withCert.Clone()
		asListed.ServerName = host
		addr := net.JoinHostPort(addrs[0], port)
		if got, err := exchange(addr, asListed, nil, fmt.Sprintf("set listed-%d 0 0 2\r\nok\r\n", i)); err != nil || got != "STORED" {
			t.Errorf("%s of %s's status.serverList (%s), verified as itself: %q, %v", server, name, addr, got, err)
		}
		if got, err := exchange(addr, asListed, nil, fmt.Sprintf("get listed-%d\r\n", i)); err != nil || got != fmt.Sprintf("VALUE listed-%d 0 2", i) {
			t.Errorf("get back from %s: %q, %v", server, got, err)
		}
	}
	t.Logf("host names: app-cache's %d addresses verified as its Service's name (as themselves: refused), %s's %d pod names verified as themselves",
		len(ephemeral), name, len(listed))
	cluster.Run(t, k.Kubeconfig, nil, bins["kubectl"], "delete", "-n", names.CacheNamespace, "memcached/"+name, "certificate/"+name+"-tls", "secret/"+name+"-tls", "--wait", "--timeout=60s")
}

// serviceEndpoints returns the ready endpoints of a Service's named port,
// as host:port, from its EndpointSlices.
func serviceEndpoints(t *testing.T, c client.Client, namespace, service, port string) []string {
	t.Helper()
	slices := &discoveryv1.EndpointSliceList{}
	if err := c.List(context.Background(), slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range slices.Items {
		for _, p := range s.Ports {
			if p.Name == nil || *p.Name != port || p.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				for _, a := range e.Addresses {
					out = append(out, net.JoinHostPort(a, strconv.Itoa(int(*p.Port))))
				}
			}
		}
	}
	return out
}

// cachePods are app-cache's live pods by name.
func cachePods(t *testing.T, c client.Client) map[string]corev1.Pod {
	t.Helper()
	list := &corev1.PodList{}
	if err := c.List(context.Background(), list, client.InNamespace(names.CacheNamespace), client.MatchingLabels{"app.kubernetes.io/instance": "app-cache"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out
}
