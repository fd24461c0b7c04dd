package chart

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// template returns the chart path and the template text of one object of
// the kustomize output. Templates are laid out by concern, as deploy/ is.
func template(o *yaml.RNode) (string, string, error) {
	t := newTemplater()
	dir, condition := "", ""
	namespace := "{{ .Release.Namespace }}"
	var err error
	switch o.GetKind() {
	case "CustomResourceDefinition":
		dir, condition = "crd", ".Values.crds.install"
		err = crd(t, o)
	case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		dir = "rbac"
		err = subjects(t, o)
	case "Deployment":
		dir = "manager"
		err = manager(t, o)
	case "Service":
		dir, condition = "manager", ".Values.metrics.enabled"
	case "NetworkPolicy":
		dir, condition = "network-policy", ".Values.networkPolicy.enabled"
		if o.GetName() == metricsPolicy {
			condition = "and .Values.networkPolicy.enabled .Values.metrics.enabled"
			err = t.set(o, "{{ .Values.networkPolicy.metricsNamespace }}",
				"spec", "ingress", "[=]", "from", "[=]", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name")
		}
	case "ServiceMonitor":
		dir, condition = "prometheus", "and .Values.metrics.enabled .Values.metrics.serviceMonitor.enabled"
	case "PodMonitor":
		dir, condition = "prometheus", ".Values.monitoring.podMonitor.enabled"
	case "Issuer", "Certificate":
		// The caches' CA goes to the caches' namespace, not the operator's.
		dir, condition = "cert-manager", ".Values.certManager.caIssuer.enabled"
		namespace = "{{ .Values.certManager.caIssuer.namespace | default .Release.Namespace }}"
	case "PrometheusRule":
		// Its annotations are Prometheus templates ({{ $labels.x }}),
		// which Helm must print, not run.
		dir, condition = "prometheus", ".Values.monitoring.alerts.enabled"
		escapeTemplates(o.YNode())
	default:
		return "", "", fmt.Errorf("hack/chart does not know where a %s goes in the chart", o.GetKind())
	}
	if err != nil {
		return "", "", err
	}
	if err := commonFields(t, o, namespace); err != nil {
		return "", "", err
	}
	text, err := t.render(o)
	if err != nil {
		return "", "", err
	}
	if condition != "" {
		text = "{{- if " + condition + " }}\n" + text + "{{- end }}\n"
	}
	file := strings.ToLower(o.GetKind()) + "-" + strings.TrimPrefix(o.GetName(), Name+"-") + ".yaml"
	return "templates/" + dir + "/" + file, text, nil
}

// commonFields templates what every object has: its namespace (the
// release's, unless the object belongs elsewhere), and Helm's labels.
func commonFields(t *templater, o *yaml.RNode, namespace string) error {
	if o.GetNamespace() != "" {
		if err := t.set(o, namespace, "metadata", "namespace"); err != nil {
			return err
		}
	}
	labels, err := o.Pipe(yaml.LookupCreate(yaml.MappingNode, "metadata", "labels"))
	if err != nil {
		return err
	}
	if values, ok := selectedBy[o.GetKind()]; ok {
		// Prometheus selects these objects by label: users add theirs.
		t.add(labels, func(indent string) []string {
			return []string{
				fmt.Sprintf("%s{{- with %s }}", indent, values),
				fmt.Sprintf("%s{{- toYaml . | nindent %d }}", indent, len(indent)),
				indent + "{{- end }}",
			}
		})
	}
	t.add(labels, func(indent string) []string {
		return []string{fmt.Sprintf(`%s{{- include "memcached-operator.labels" . | nindent %d }}`, indent, len(indent))}
	})
	return nil
}

// selectedBy are the values holding the labels Prometheus selects each
// prometheus-operator kind by.
var selectedBy = map[string]string{
	"ServiceMonitor": ".Values.metrics.serviceMonitor.labels",
	"PodMonitor":     ".Values.monitoring.podMonitor.labels",
	"PrometheusRule": ".Values.monitoring.alerts.labels",
}

// escapeTemplates makes every {{ and }} in the object's strings print as
// themselves when Helm renders the template.
func escapeTemplates(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode {
		v := strings.NewReplacer("{{", "\x00", "}}", "\x01").Replace(n.Value)
		n.Value = strings.NewReplacer("\x00", "{{`{{`}}", "\x01", "{{`}}`}}").Replace(v)
		return
	}
	for _, c := range n.Content {
		escapeTemplates(c)
	}
}

// crd keeps the CRD on uninstall when crds.keep: deleting it would delete
// every Memcached, and so every cache.
func crd(t *templater, o *yaml.RNode) error {
	annotations, err := o.Pipe(yaml.LookupCreate(yaml.MappingNode, "metadata", "annotations"))
	if err != nil {
		return err
	}
	t.add(annotations, func(indent string) []string {
		return []string{indent + "{{- if .Values.crds.keep }}", indent + HelmAnnotations[0] + ": keep", indent + "{{- end }}"}
	})
	return nil
}

// subjects binds RBAC to the ServiceAccount in the release's namespace.
func subjects(t *templater, o *yaml.RNode) error {
	list, err := o.Pipe(yaml.Lookup("subjects"))
	if err != nil || list == nil {
		return err
	}
	items, err := list.Elements()
	if err != nil {
		return err
	}
	for _, s := range items {
		if s.Field("namespace") != nil {
			if err := s.PipeE(yaml.SetField("namespace", yaml.NewScalarRNode(t.expr("{{ .Release.Namespace }}")))); err != nil {
				return err
			}
		}
	}
	return nil
}

// manager templates the manager Deployment's knobs.
func manager(t *templater, o *yaml.RNode) error {
	if err := t.set(o, "{{ .Values.manager.replicas }}", "spec", "replicas"); err != nil {
		return err
	}
	pod, err := o.Pipe(yaml.Lookup("spec", "template", "spec"))
	if err != nil || pod == nil {
		return fmt.Errorf("no pod template")
	}
	c, err := pod.Pipe(yaml.Lookup("containers", "[name=manager]"))
	if err != nil || c == nil {
		return fmt.Errorf("no manager container")
	}
	nameFirst(c)
	if err := t.set(c, `{{ include "memcached-operator.image" . }}`, "image"); err != nil {
		return err
	}
	t.add(c, func(indent string) []string {
		return []string{indent + "{{- with .Values.image.pullPolicy }}", indent + "imagePullPolicy: {{ . }}", indent + "{{- end }}"}
	})
	args, err := managerArgs(c)
	if err != nil {
		return err
	}
	if err := t.replace(c, "args", func(indent string) []string {
		out := []string{indent + "args:"}
		for _, l := range args {
			out = append(out, indent+l)
		}
		return out
	}); err != nil {
		return err
	}
	env, err := c.Pipe(yaml.Lookup("env"))
	if err != nil || env == nil {
		return fmt.Errorf("the manager container has no env")
	}
	envText, err := env.String()
	if err != nil {
		return err
	}
	if err := t.replace(c, "env", func(indent string) []string {
		out := append([]string{indent + "env:"}, lines(indent, envText)...)
		return append(out,
			indent+"{{- with .Values.manager.watchNamespaces }}",
			indent+"- name: WATCH_NAMESPACES",
			indent+`  value: {{ join "," . | quote }}`,
			indent+"{{- end }}")
	}); err != nil {
		return err
	}
	for field, values := range map[string]string{
		"resources":       ".Values.manager.resources",
		"securityContext": ".Values.manager.securityContext",
	} {
		if err := t.replace(c, field, toYAML(field, values)); err != nil {
			return err
		}
	}
	if err := t.replace(pod, "securityContext", toYAML("securityContext", ".Values.manager.podSecurityContext")); err != nil {
		return err
	}
	for _, f := range []struct{ field, values string }{
		{"imagePullSecrets", ".Values.imagePullSecrets"},
		{"nodeSelector", ".Values.manager.nodeSelector"},
		{"tolerations", ".Values.manager.tolerations"},
		{"affinity", ".Values.manager.affinity"},
	} {
		if pod.Field(f.field) != nil {
			return fmt.Errorf("the base pod sets %s, which the chart owns as a value", f.field)
		}
		t.add(pod, withYAML(f.field, f.values))
	}
	// Checks of combinations the schema cannot express run here.
	t.add(o, func(indent string) []string { return []string{`{{- include "memcached-operator.validate" . }}`} })
	return nil
}

// managerArgs are the lines of the manager's args as knobs: leader
// election and the metrics address follow values, a log level is added
// when set, the rest is kept as the base has it.
func managerArgs(c *yaml.RNode) ([]string, error) {
	list, err := c.Pipe(yaml.Lookup("args"))
	if err != nil || list == nil {
		return nil, fmt.Errorf("the manager container has no args")
	}
	var out []string
	seen := map[string]bool{}
	for _, a := range list.YNode().Content {
		arg := a.Value
		switch {
		case arg == "--leader-elect":
			out = append(out, "{{- if .Values.manager.leaderElection }}", "- --leader-elect", "{{- end }}")
		case strings.HasPrefix(arg, "--metrics-bind-address="):
			out = append(out, "{{- if .Values.metrics.enabled }}", "- "+quoted(arg), "{{- else }}", "- --metrics-bind-address=0", "{{- end }}")
		case strings.HasPrefix(arg, "--zap-log-level"), strings.HasPrefix(arg, "--watch-namespaces"):
			return nil, fmt.Errorf("the base manager sets %s, which the chart owns as a value", arg)
		default:
			out = append(out, "- "+quoted(arg))
		}
		seen[strings.SplitN(arg, "=", 2)[0]] = true
	}
	for _, want := range []string{"--leader-elect", "--metrics-bind-address"} {
		if !seen[want] {
			return nil, fmt.Errorf("the base manager has no %s, which the chart's values expect", want)
		}
	}
	return append(out, "{{- with .Values.manager.logLevel }}", "- --zap-log-level={{ . }}", "{{- end }}"), nil
}

// nameFirst moves a container's name to its first field, where readers
// look for it (and where a template block may never be).
func nameFirst(c *yaml.RNode) {
	content := c.YNode().Content
	for i := 0; i < len(content); i += 2 {
		if content[i].Value == "name" {
			reordered := make([]*yaml.Node, 0, len(content))
			reordered = append(reordered, content[i], content[i+1])
			reordered = append(reordered, content[:i]...)
			reordered = append(reordered, content[i+2:]...)
			c.YNode().Content = reordered
			return
		}
	}
}
