package chart

import (
	"fmt"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// valuesOf defines the chart's knobs. Their defaults are what the base's
// manager Deployment has, so default values render the base.
func valuesOf(deployment *yaml.RNode, repository string) (value, error) {
	get := func(path ...string) (any, error) {
		n, err := deployment.Pipe(yaml.Lookup(path...))
		if err != nil || n == nil {
			return nil, fmt.Errorf("the manager Deployment has no %v", path)
		}
		var v any
		return v, n.YNode().Decode(&v)
	}
	container := []string{"spec", "template", "spec", "containers", "[name=manager]"}
	replicas, err := get("spec", "replicas")
	if err != nil {
		return value{}, err
	}
	resources, err := get(append(container, "resources")...)
	if err != nil {
		return value{}, err
	}
	securityContext, err := get(append(container, "securityContext")...)
	if err != nil {
		return value{}, err
	}
	podSecurityContext, err := get("spec", "template", "spec", "securityContext")
	if err != nil {
		return value{}, err
	}

	return object("", "",
		object("image", "The manager's image.",
			leaf("repository", "", repository, map[string]any{"type": "string", "minLength": 1}),
			leaf("tag", "Defaults to the chart's appVersion.", "", map[string]any{"type": "string"}),
			leaf("digest", "Pins the image by digest (sha256:...), as releases do: the tag is then informative.", "",
				map[string]any{"type": "string", "pattern": `^(sha256:[a-f0-9]{64})?$`}),
			leaf("pullPolicy", "Empty leaves Kubernetes' default (IfNotPresent for a tag other than latest).", "",
				map[string]any{"type": "string", "enum": []string{"", "Always", "IfNotPresent", "Never"}}),
		),
		leaf("imagePullSecrets", "Secrets to pull the manager image with, e.g. [{name: regcred}].", []any{},
			map[string]any{"type": "array", "items": map[string]any{
				"type": "object", "required": []string{"name"}, "additionalProperties": false,
				"properties": map[string]any{"name": map[string]any{"type": "string", "minLength": 1}},
			}}),
		object("manager", "The manager Deployment.",
			leaf("replicas", "More than one needs leaderElection: one replica leads, the others stand by.", replicas,
				map[string]any{"type": "integer", "minimum": 0}),
			leaf("leaderElection", "Elect a leader through a Lease (--leader-elect).", true, boolean),
			leaf("logLevel", "--zap-log-level: empty keeps the manager's default (info).", "",
				map[string]any{"type": "string", "enum": []string{"", "debug", "info", "error"}}),
			leaf("watchNamespaces", "Namespaces whose Memcacheds the operator manages; empty is all of them.", []any{},
				map[string]any{"type": "array", "uniqueItems": true, "items": dnsLabel}),
			leaf("resources", "", resources, map[string]any{
				"type": "object", "additionalProperties": false,
				"properties": map[string]any{"limits": anyObject, "requests": anyObject, "claims": objectList},
			}),
			leaf("podSecurityContext", "", podSecurityContext, anyObject),
			leaf("securityContext", "The manager container's.", securityContext, anyObject),
			leaf("nodeSelector", "", map[string]any{}, stringMap),
			leaf("tolerations", "", []any{}, objectList),
			leaf("affinity", "", map[string]any{}, anyObject),
		),
		object("metrics", "The manager's HTTPS metrics endpoint (:8443), for callers allowed by the metrics-reader ClusterRole.",
			leaf("enabled", "", true, boolean),
			object("serviceMonitor", "A prometheus-operator ServiceMonitor for it (needs the monitoring.coreos.com CRDs).",
				leaf("enabled", "", false, boolean),
				leaf("labels", "Labels your Prometheus selects ServiceMonitors by, e.g. {release: prometheus}.", map[string]any{}, stringMap),
			),
		),
		object("monitoring", "The caches' monitoring, for clusters with prometheus-operator.",
			object("podMonitor", "A PodMonitor scraping the memcached_exporter sidecar of every Memcached that enables it (spec.monitoring.exporter), in every namespace.",
				leaf("enabled", "", false, boolean),
				leaf("labels", "Labels your Prometheus selects PodMonitors by.", map[string]any{}, stringMap),
			),
			object("alerts", "A PrometheusRule with the operator's and the caches' alerts (docs/runbooks.md).",
				leaf("enabled", "", false, boolean),
				leaf("labels", "Labels your Prometheus selects PrometheusRules by.", map[string]any{}, stringMap),
			),
		),
		object("certManager", "cert-manager objects for the caches' TLS (docs/security.md); they need cert-manager in the cluster.",
			object("caIssuer", "A CA for the caches' certificates, as deploy/components/cert-manager makes it: a self-signed Issuer, the cache-ca CA Certificate, and the cache-ca Issuer that a Memcached's server Certificate and its clients' Certificates name in issuerRef.",
				leaf("enabled", "", false, boolean),
				leaf("namespace", "The caches' namespace; empty is the release's.", "", map[string]any{"type": "string", "pattern": `^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`, "maxLength": 63}),
			),
		),
		object("networkPolicy", "NetworkPolicies: deny ingress to the release namespace's pods except the metrics port from metricsNamespace. Give the operator a namespace of its own.",
			leaf("enabled", "", true, boolean),
			leaf("metricsNamespace", "The namespace of your Prometheus.", "monitoring", dnsLabel),
		),
		object("crds", "The Memcached CRD.",
			leaf("install", "Install and upgrade it with the chart.", true, boolean),
			leaf("keep", "Keep it on uninstall (helm.sh/resource-policy: keep): deleting it would delete every Memcached.", true, boolean),
		),
		object("uninstall", "",
			leaf("deleteMemcacheds", "Delete every Memcached (of watchNamespaces) before the operator is removed (a pre-delete hook), so that the operator releases them; otherwise they stay, with their caches running, and wait for an operator to delete them.", true, boolean),
		),
	), nil
}
