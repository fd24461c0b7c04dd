// Package netpol decides, as Kubernetes NetworkPolicy semantics define it,
// whether a pod may receive traffic from another pod on a port. kwok runs no
// network, so tests check the rendered policies with it: each selector must
// let in what it must and nothing else.
//
// The rules (https://kubernetes.io/docs/concepts/services-networking/network-policies/):
// a pod is isolated for ingress when a policy in its namespace selects it
// and has Ingress among its policyTypes (which default to Ingress, plus
// Egress when egress rules exist); an isolated pod accepts a connection
// only if some selecting policy has a rule whose from (empty: everyone) and
// ports (empty: all) both match. A peer with only a podSelector means pods
// of the policy's own namespace; only a namespaceSelector, every pod of the
// matching namespaces; both, the matching pods of the matching namespaces.
// Namespaces always carry kubernetes.io/metadata.name.
package netpol

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Pod is a pod by its namespace and labels.
type Pod struct {
	Namespace       string
	NamespaceLabels map[string]string
	Labels          map[string]string
	// Ports are its containers' named TCP ports, which a policy's named
	// port refers to.
	Ports map[string]int32
}

func (p Pod) namespaceLabels() labels.Set {
	out := labels.Set{"kubernetes.io/metadata.name": p.Namespace}
	for k, v := range p.NamespaceLabels {
		out[k] = v
	}
	return out
}

// Allowed reports whether dst accepts a TCP connection from src on port.
func Allowed(policies []networkingv1.NetworkPolicy, src, dst Pod, port int32) (bool, error) {
	isolated := false
	for _, p := range policies {
		if p.Namespace != dst.Namespace {
			continue
		}
		selects, err := matches(&p.Spec.PodSelector, dst.Labels)
		if err != nil {
			return false, fmt.Errorf("policy %s: %w", p.Name, err)
		}
		if !selects || !ingressType(p.Spec) {
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Ingress {
			from, err := fromMatches(rule.From, p.Namespace, src)
			if err != nil {
				return false, fmt.Errorf("policy %s: %w", p.Name, err)
			}
			if from && portMatches(rule.Ports, dst, port) {
				return true, nil
			}
		}
	}
	return !isolated, nil
}

func ingressType(spec networkingv1.NetworkPolicySpec) bool {
	if len(spec.PolicyTypes) == 0 {
		return true
	}
	return slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

func fromMatches(peers []networkingv1.NetworkPolicyPeer, policyNamespace string, src Pod) (bool, error) {
	if len(peers) == 0 {
		return true, nil
	}
	for _, peer := range peers {
		switch {
		case peer.IPBlock != nil:
			// Pod-to-pod traffic is selected by labels, not addresses.
			continue
		case peer.NamespaceSelector != nil:
			ns, err := matches(peer.NamespaceSelector, src.namespaceLabels())
			if err != nil || !ns {
				if err != nil {
					return false, err
				}
				continue
			}
			if peer.PodSelector == nil {
				return true, nil
			}
			pod, err := matches(peer.PodSelector, src.Labels)
			if err != nil {
				return false, err
			}
			if pod {
				return true, nil
			}
		case peer.PodSelector != nil:
			if src.Namespace != policyNamespace {
				continue
			}
			pod, err := matches(peer.PodSelector, src.Labels)
			if err != nil {
				return false, err
			}
			if pod {
				return true, nil
			}
		}
	}
	return false, nil
}

func portMatches(ports []networkingv1.NetworkPolicyPort, dst Pod, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		// A named port is the destination container port of that name;
		// a pod without one is not selected by it.
		if p.Port.Type == intstr.String {
			if n, ok := dst.Ports[p.Port.StrVal]; ok && n == port {
				return true
			}
			continue
		}
		if p.Port.IntValue() == int(port) {
			return true
		}
		if p.EndPort != nil && port >= int32(p.Port.IntValue()) && port <= *p.EndPort {
			return true
		}
	}
	return false
}

func matches(sel *metav1.LabelSelector, set map[string]string) (bool, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(set)), nil
}
