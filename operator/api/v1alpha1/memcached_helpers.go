package v1alpha1

import "fmt"

// GetSize returns spec.size, or its default when the field is unset (the
// apiserver defaults it, but objects built in Go may not be defaulted).
func (m *Memcached) GetSize() int32 {
	if m.Spec.Size == nil {
		return DefaultSize
	}
	return *m.Spec.Size
}

// Endpoint is the address clients use: the headless Service's DNS name and
// the memcached port.
func (m *Memcached) Endpoint() string {
	return fmt.Sprintf("%s.%s.svc:%d", m.Name, m.Namespace, MemcachedPort)
}
