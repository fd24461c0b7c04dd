package chart

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/kustomize/kyaml/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// hookName names the uninstall hook's objects.
const hookName = Name + "-delete-memcacheds"

// uninstallHook is the chart's pre-delete hook, which the kustomize
// install has no counterpart of (`make undeploy` does the same with
// kubectl): a Job running the manager image as `manager
// --delete-memcacheds`, which deletes every Memcached and waits until the
// still running operator has released them, under a ServiceAccount that
// may only list and delete Memcacheds. Helm runs it before deleting
// anything, waits for the Job, and deletes the hook's objects when it
// succeeds; when it fails, `helm uninstall` stops and they stay for
// inspection.
func uninstallHook() ([]byte, error) {
	hook := func(weight string) map[string]string {
		return map[string]string{
			"helm.sh/hook":               "pre-delete",
			"helm.sh/hook-weight":        weight,
			"helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
		}
	}
	meta := func(namespaced bool, weight string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: hookName, Annotations: hook(weight), Labels: map[string]string{
			"app.kubernetes.io/name": Name, "app.kubernetes.io/part-of": Name, "app.kubernetes.io/component": "uninstall",
		}}
		if namespaced {
			m.Namespace = "RELEASE-NAMESPACE"
		}
		return m
	}
	objects := []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(true, "-10")},
		&rbacv1.ClusterRole{
			TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: meta(false, "-10"),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"cache.example.com"}, Resources: []string{"memcacheds"}, Verbs: []string{"list", "delete"}}},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: meta(false, "-5"),
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: hookName},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: hookName, Namespace: "RELEASE-NAMESPACE"}},
		},
		&batchv1.Job{
			TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, ObjectMeta: meta(true, "0"),
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](1),
				// A little longer than the manager's --delete-memcacheds-timeout.
				ActiveDeadlineSeconds: ptr.To[int64](330),
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/component": "uninstall"}},
					Spec: corev1.PodSpec{
						ServiceAccountName: hookName,
						RestartPolicy:      corev1.RestartPolicyNever,
						SecurityContext:    &corev1.PodSecurityContext{},
						Containers: []corev1.Container{{
							Name:            "delete-memcacheds",
							Image:           "IMAGE",
							Args:            []string{"--delete-memcacheds", "--delete-memcacheds-timeout=5m"},
							Resources:       corev1.ResourceRequirements{},
							SecurityContext: &corev1.SecurityContext{},
						}},
					},
				},
			},
		},
	}
	var docs []string
	for _, o := range objects {
		raw, err := sigsyaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		n, err := yaml.Parse(string(raw))
		if err != nil {
			return nil, err
		}
		text, err := hookTemplate(n)
		if err != nil {
			return nil, err
		}
		docs = append(docs, text)
	}
	return []byte("{{- if .Values.uninstall.deleteMemcacheds }}\n" + strings.Join(docs, "---\n") + "{{- end }}\n"), nil
}

func hookTemplate(n *yaml.RNode) (string, error) {
	t := newTemplater()
	// sigs.k8s.io/yaml writes what the typed objects leave empty.
	_ = n.PipeE(yaml.Lookup("metadata"), yaml.Clear("creationTimestamp"))
	_ = n.PipeE(yaml.Lookup("spec", "template", "metadata"), yaml.Clear("creationTimestamp"))
	_ = n.PipeE(yaml.Clear("status"))
	if n.GetKind() == "ClusterRoleBinding" {
		if err := subjects(t, n); err != nil {
			return "", err
		}
	}
	if n.GetKind() == "Job" {
		pod, err := n.Pipe(yaml.Lookup("spec", "template", "spec"))
		if err != nil {
			return "", err
		}
		c, err := pod.Pipe(yaml.Lookup("containers", "[name=delete-memcacheds]"))
		if err != nil {
			return "", err
		}
		nameFirst(c)
		if err := t.set(c, `{{ include "memcached-operator.image" . }}`, "image"); err != nil {
			return "", err
		}
		t.add(c, func(indent string) []string {
			return []string{indent + "{{- with .Values.image.pullPolicy }}", indent + "imagePullPolicy: {{ . }}", indent + "{{- end }}"}
		})
		t.add(c, func(indent string) []string {
			return []string{
				indent + "{{- with .Values.manager.watchNamespaces }}",
				indent + "env:",
				indent + "- name: WATCH_NAMESPACES",
				indent + `  value: {{ join "," . | quote }}`,
				indent + "{{- end }}",
			}
		})
		for field, values := range map[string]string{"resources": ".Values.manager.resources", "securityContext": ".Values.manager.securityContext"} {
			if err := t.replace(c, field, toYAML(field, values)); err != nil {
				return "", err
			}
		}
		if err := t.replace(pod, "securityContext", toYAML("securityContext", ".Values.manager.podSecurityContext")); err != nil {
			return "", err
		}
		for _, f := range []struct{ field, values string }{
			{"imagePullSecrets", ".Values.imagePullSecrets"},
			{"nodeSelector", ".Values.manager.nodeSelector"},
			{"tolerations", ".Values.manager.tolerations"},
			{"affinity", ".Values.manager.affinity"},
		} {
			t.add(pod, withYAML(f.field, f.values))
		}
	}
	if err := commonFields(t, n, "{{ .Release.Namespace }}"); err != nil {
		return "", err
	}
	return t.render(n)
}
