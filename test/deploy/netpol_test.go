package deploy

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/example/memcached-operator/test/internal/names"
	"github.com/example/memcached-operator/test/internal/netpol"
)

// The rendered NetworkPolicies do what they say, under Kubernetes'
// NetworkPolicy semantics (kwok enforces none, so test/internal/netpol
// decides): default-deny in the operator's and the cache namespace; the
// manager's metrics only from the monitoring namespace (by the name label
// every namespace carries); memcached only from pods labelled as its
// clients, its exporter only from monitoring; and nothing else.
func TestNetworkPolicies(t *testing.T) {
	for _, env := range envs {
		t.Run(env, func(t *testing.T) {
			r := render(t, "overlays/"+env)
			var policies []networkingv1.NetworkPolicy
			for _, o := range renderList(t, "overlays/"+env) {
				if o.GetKind() == "NetworkPolicy" {
					p := networkingv1.NetworkPolicy{}
					if err := yamlToObject(o.MustString(), &p); err != nil {
						t.Fatal(err)
					}
					policies = append(policies, p)
				}
			}
			mgr := &appsv1.Deployment{}
			if err := yamlToObject(r[manager].MustString(), mgr); err != nil {
				t.Fatal(err)
			}
			manager := netpol.Pod{Namespace: names.OperatorNamespace, Labels: mgr.Spec.Template.Labels}
			// The labels the operator gives every memcached pod
			// (operator/internal/resources.Labels; test/memcached reads them
			// from live pod templates).
			// and the container ports it names (operator/internal/resources).
			cache := netpol.Pod{Namespace: names.CacheNamespace, Labels: map[string]string{
				"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "app-cache", "app.kubernetes.io/managed-by": "memcached-operator",
			}, Ports: map[string]int32{"memcached": 11211, "metrics": 9150}}
			migrating := cache
			migrating.Ports = map[string]int32{"memcached": 11211, "memcached-plain": 11212}
			prometheus := netpol.Pod{Namespace: "monitoring", Labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
			client := netpol.Pod{Namespace: "shop", Labels: map[string]string{"app": "checkout", "cache.example.com/client": "true"}}
			stranger := netpol.Pod{Namespace: "shop", Labels: map[string]string{"app": "checkout"}}
			// The old policy let in any namespace labelled metrics=enabled,
			// which only the operator's own namespace carried.
			labelled := netpol.Pod{Namespace: "tenant", NamespaceLabels: map[string]string{"metrics": "enabled"}, Labels: map[string]string{"app": "x"}}
			neighbour := netpol.Pod{Namespace: names.OperatorNamespace, Labels: map[string]string{"app": "debug"}}
			debug := netpol.Pod{Namespace: names.CacheNamespace, Labels: map[string]string{"app": "debug"}}

			for _, c := range []struct {
				name     string
				src, dst netpol.Pod
				port     int32
				want     bool
			}{
				{"Prometheus scrapes the manager", prometheus, manager, 8443, true},
				{"Prometheus reaches no other manager port", prometheus, manager, 8081, false},
				{"a labelled tenant namespace does not reach the metrics", labelled, manager, 8443, false},
				{"a pod beside the manager does not reach it", neighbour, manager, 8443, false},
				{"a cache client does not reach the manager", client, manager, 8443, false},
				{"a client reaches memcached", client, cache, 11211, true},
				{"a client does not reach the exporter", client, cache, 9150, false},
				{"an unlabelled pod does not reach memcached", stranger, cache, 11211, false},
				{"Prometheus scrapes the exporter", prometheus, cache, 9150, true},
				{"Prometheus does not reach memcached itself", prometheus, cache, 11211, false},
				{"another pod of the cache namespace is closed", client, debug, 8080, false},
				{"memcached pods do not reach each other's exporter", cache, cache, 9150, false},
				{"a client reaches the plaintext port of a cache migrating to TLS", client, migrating, 11212, true},
				{"an unlabelled pod does not reach the plaintext port", stranger, migrating, 11212, false},
				{"a cache without a plaintext port is closed there", client, cache, 11212, false},
			} {
				got, err := netpol.Allowed(policies, c.src, c.dst, c.port)
				if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Errorf("%s (port %d): allowed=%v, want %v", c.name, c.port, got, c.want)
				}
			}
		})
	}
}
