package resources

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

func TestSecurity(t *testing.T) {
	opts := testOptions
	opts.ReloaderImage = "operator:v1"
	tlsSpec := func(mode cachev1alpha1.ClientCertificateMode, min cachev1alpha1.TLSVersion, plain *int32) func(*cachev1alpha1.Memcached) {
		return func(m *cachev1alpha1.Memcached) {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{TLS: &cachev1alpha1.TLSSpec{SecretName: "tls", ClientCertificates: mode, MinVersion: min, PlaintextPort: plain}}
		}
	}
	withAuth := func(m *cachev1alpha1.Memcached) {
		if m.Spec.Security == nil {
			m.Spec.Security = &cachev1alpha1.SecuritySpec{}
		}
		m.Spec.Security.Auth = &cachev1alpha1.AuthSpec{SecretName: "auth"}
	}
	for _, tc := range []struct {
		name          string
		m             *cachev1alpha1.Memcached
		args          string // the security flags, in order
		reloader      string
		exporterAddr  string
		servicePorts  []string
		sharesProcess bool
	}{
		{name: "seed: no security, nothing added", m: seed(), servicePorts: []string{"memcached"}},
		{
			name:     "TLS with defaults",
			m:        seed(tlsSpec("", "", nil)),
			args:     "-Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_verify_mode=0,ssl_min_version=2 -l *:11211,notls:127.0.0.1:11210 -X -W -F",
			reloader: "/reloader --tls-dir=/etc/memcached/tls --memcached-address=127.0.0.1:11210", servicePorts: []string{"memcached"},
		},
		{
			name:     "required client certificates, TLS 1.3, a migration port",
			m:        seed(tlsSpec(cachev1alpha1.ClientCertificatesRequire, cachev1alpha1.TLSVersion13, ptr.To[int32](11212))),
			args:     "-Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2,ssl_min_version=3 -l *:11211,notls:127.0.0.1:11210,notls:*:11212 -X -W -F",
			reloader: "/reloader --tls-dir=/etc/memcached/tls --memcached-address=127.0.0.1:11210", servicePorts: []string{"memcached", "memcached-plain"},
		},
		{
			name:     "requested client certificates",
			m:        seed(tlsSpec(cachev1alpha1.ClientCertificatesRequest, "", nil)),
			args:     "-Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=1,ssl_min_version=2 -l *:11211,notls:127.0.0.1:11210 -X -W -F",
			reloader: "/reloader --tls-dir=/etc/memcached/tls --memcached-address=127.0.0.1:11210", servicePorts: []string{"memcached"},
		},
		{
			name:     "auth alone, flush_all allowed",
			m:        seed(withAuth, func(m *cachev1alpha1.Memcached) { m.Spec.Security.AllowFlushAll = true }),
			args:     "-Y /etc/memcached/auth/auth-file -B ascii -X -W",
			reloader: "/reloader --auth-file=/etc/memcached/auth/auth-file --memcached-address=127.0.0.1:11211", servicePorts: []string{"memcached"}, sharesProcess: true,
		},
		{
			name: "TLS with the exporter: it scrapes the loopback listener",
			m: seed(tlsSpec("", "", nil), func(m *cachev1alpha1.Memcached) {
				m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
			}),
			args:         "-Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_verify_mode=0,ssl_min_version=2 -l *:11211,notls:127.0.0.1:11210 -X -W -F",
			reloader:     "/reloader --tls-dir=/etc/memcached/tls --memcached-address=127.0.0.1:11210",
			exporterAddr: "--memcached.address=127.0.0.1:11210", servicePorts: []string{"memcached", "metrics"},
		},
		{
			name: "TLS, auth and the exporter: it scrapes through the reloader, which authenticates",
			m: seed(tlsSpec(cachev1alpha1.ClientCertificatesRequire, "", nil), withAuth, func(m *cachev1alpha1.Memcached) {
				m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
			}),
			args:         "-Z -o ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_ca_cert=/etc/memcached/tls/ca.crt,ssl_verify_mode=2,ssl_min_version=2 -l *:11211,notls:127.0.0.1:11210 -Y /etc/memcached/auth/auth-file -B ascii -X -W -F",
			reloader:     "/reloader --tls-dir=/etc/memcached/tls --auth-file=/etc/memcached/auth/auth-file --exporter-listen-address=127.0.0.1:11209 --memcached-address=127.0.0.1:11210",
			exporterAddr: "--memcached.address=127.0.0.1:11209", servicePorts: []string{"memcached", "metrics"}, sharesProcess: true,
		},
		{
			name: "auth and the exporter, no TLS",
			m: seed(withAuth, func(m *cachev1alpha1.Memcached) {
				m.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: true}}
			}),
			args:         "-Y /etc/memcached/auth/auth-file -B ascii -X -W -F",
			reloader:     "/reloader --auth-file=/etc/memcached/auth/auth-file --exporter-listen-address=127.0.0.1:11209 --memcached-address=127.0.0.1:11211",
			exporterAddr: "--memcached.address=127.0.0.1:11209", servicePorts: []string{"memcached", "metrics"}, sharesProcess: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(securityArgs(tc.m), " "); got != tc.args {
				t.Errorf("security args:\n got %s\nwant %s", got, tc.args)
			}
			d := Deployment(tc.m, opts)
			pod := d.Spec.Template.Spec
			i, ok := container(d, "reloader")
			if tc.reloader == "" {
				if ok || len(pod.Volumes) > 0 || pod.SecurityContext.FSGroup != nil {
					t.Error("an unsecured cache got a reloader, volumes or an fsGroup: every existing pod template would change on upgrade")
				}
			} else {
				if !ok {
					t.Fatal("no reloader container")
				}
				if got := strings.Join(append(pod.Containers[i].Command, pod.Containers[i].Args...), " "); got != tc.reloader || *pod.Containers[i].Image != "operator:v1" {
					t.Errorf("reloader %s %s, want %s", *pod.Containers[i].Image, got, tc.reloader)
				}
				if len(pod.Containers[i].VolumeMounts) != len(pod.Containers[0].VolumeMounts) || len(pod.Containers[0].VolumeMounts) == 0 {
					t.Error("memcached and the reloader must mount the same Secrets")
				}
				if ptr.Deref(pod.SecurityContext.FSGroup, 0) != cachev1alpha1.MemcachedUID {
					t.Error("no fsGroup: the 0440 Secret files would be unreadable")
				}
			}
			if ptr.Deref(pod.ShareProcessNamespace, false) != tc.sharesProcess {
				t.Errorf("shareProcessNamespace = %v, want %v (SIGHUP reloads the password file)", pod.ShareProcessNamespace, tc.sharesProcess)
			}
			if tc.exporterAddr != "" {
				i, _ := container(d, "exporter")
				if !slices.Contains(pod.Containers[i].Args, tc.exporterAddr) {
					t.Errorf("exporter args %v, want %s", pod.Containers[i].Args, tc.exporterAddr)
				}
			}
			var ports []string
			for _, p := range Service(tc.m).Spec.Ports {
				ports = append(ports, *p.Name)
			}
			if !slices.Equal(ports, tc.servicePorts) {
				t.Errorf("Service ports %v, want %v", ports, tc.servicePorts)
			}
		})
	}
}
