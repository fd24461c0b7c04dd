package cluster

import (
	"bytes"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"
)

// CoreDNSPort is where CoreDNS listens in its pod: above 1024, so that it
// runs as non-root without capabilities; the kube-dns Service maps 53 to
// it.
const CoreDNSPort = 1053

// Corefile answers cluster.local from the API and nothing else: there is
// no upstream to forward to.
func Corefile() string {
	return `.:1053 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
    loop
    reload
    loadbalance
}
`
}

// NodeObjects are the real nodes' Node objects, created before their
// kubelets register so that each has its pod range (spec.podCIDR) from the
// start, as kube-controller-manager's node IPAM would give it.
func NodeObjects(nodes []Node) []any {
	var out []any
	for _, n := range nodes {
		cidr := n.Net.PodCIDR(n.Index).String()
		out = append(out, &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name, "node.cache.example.com/real": "true"}},
			Spec:       corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}},
		})
	}
	return out
}

// CoreDNSObjects are the cluster DNS, as kubeadm installs it: CoreDNS in
// kube-system behind the kube-dns Service at DNSServiceIP.
func CoreDNSObjects(img string) []any {
	labels := map[string]string{"k8s-app": "kube-dns"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels}
	}
	return []any{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta("coredns")},
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:coredns"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "coredns", Namespace: "kube-system"}},
		},
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta("coredns"), Data: map[string]string{"Corefile": Corefile()}},
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta("coredns"),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: "coredns",
						DNSPolicy:          corev1.DNSDefault,
						PriorityClassName:  "system-cluster-critical",
						SecurityContext: &corev1.PodSecurityContext{
							RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						Containers: []corev1.Container{{
							Name:  "coredns",
							Image: img,
							Args:  []string{"-conf", "/etc/coredns/Corefile"},
							Ports: []corev1.ContainerPort{
								{Name: "dns", ContainerPort: CoreDNSPort, Protocol: corev1.ProtocolUDP},
								{Name: "dns-tcp", ContainerPort: CoreDNSPort, Protocol: corev1.ProtocolTCP},
							},
							Resources: corev1.ResourceRequirements{
								Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
								Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
							},
							LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8181)}}, PeriodSeconds: 2},
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
								Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
							VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
						}},
						Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"}}}}},
					},
				},
			},
		},
		&corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: meta("kube-dns"),
			Spec: corev1.ServiceSpec{
				ClusterIP: DNSServiceIP,
				Selector:  labels,
				Ports: []corev1.ServicePort{
					{Name: "dns", Port: 53, TargetPort: intstr.FromInt32(CoreDNSPort), Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", Port: 53, TargetPort: intstr.FromInt32(CoreDNSPort), Protocol: corev1.ProtocolTCP},
				},
			},
		},
	}
}

// YAMLStream is objects as one multi-document YAML stream, for kubectl.
func YAMLStream(objects []any) ([]byte, error) {
	var buf bytes.Buffer
	for _, o := range objects {
		b, err := sigsyaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}
