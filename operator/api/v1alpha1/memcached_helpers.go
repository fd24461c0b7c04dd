package v1alpha1

import (
	"fmt"

	"k8s.io/utils/ptr"
)

// GetSize returns spec.size, or its default when the field is unset (the
// apiserver defaults it, but objects built in Go may not be defaulted).
func (m *Memcached) GetSize() int32 {
	if m.Spec.Size == nil {
		return DefaultSize
	}
	return *m.Spec.Size
}

// MaxMemoryMB returns spec.memcached.maxMemoryMB or its default.
func (m *Memcached) MaxMemoryMB() int32 {
	if m.Spec.Memcached == nil {
		return DefaultMaxMemoryMB
	}
	return ptr.Deref(m.Spec.Memcached.MaxMemoryMB, DefaultMaxMemoryMB)
}

// MaxConnections returns spec.memcached.maxConnections or its default.
func (m *Memcached) MaxConnections() int32 {
	if m.Spec.Memcached == nil {
		return DefaultMaxConnections
	}
	return ptr.Deref(m.Spec.Memcached.MaxConnections, DefaultMaxConnections)
}

// GetIdentity returns spec.identity or its default, Ephemeral.
func (m *Memcached) GetIdentity() Identity {
	if m.Spec.Identity == "" {
		return IdentityEphemeral
	}
	return m.Spec.Identity
}

// MinReadySeconds returns spec.highAvailability.minReadySeconds or its default.
func (m *Memcached) MinReadySeconds() int32 {
	if m.Spec.HighAvailability == nil {
		return DefaultMinReadySeconds
	}
	return ptr.Deref(m.Spec.HighAvailability.MinReadySeconds, DefaultMinReadySeconds)
}

// DrainSeconds returns spec.highAvailability.drainSeconds or its default.
func (m *Memcached) DrainSeconds() int32 {
	if m.Spec.HighAvailability == nil {
		return DefaultDrainSeconds
	}
	return ptr.Deref(m.Spec.HighAvailability.DrainSeconds, DefaultDrainSeconds)
}

// WarmRestart returns spec.memcached.warmRestart when it is enabled, else nil.
func (m *Memcached) WarmRestart() *WarmRestartSpec {
	if m.Spec.Memcached == nil || m.Spec.Memcached.WarmRestart == nil || !m.Spec.Memcached.WarmRestart.Enabled {
		return nil
	}
	return m.Spec.Memcached.WarmRestart
}

// Endpoint is the address clients use: the headless Service's DNS name and
// the memcached port.
func (m *Memcached) Endpoint() string {
	return fmt.Sprintf("%s.%s.svc:%d", m.Name, m.Namespace, MemcachedPort)
}

// MinimumMemoryMiB is the memory a memcached process with these settings
// can reach, in MiB, and so the default memory request and limit of its
// container and the smallest limit the CRD accepts:
//
//	maxMemoryMB                 the items (memcached -m)
//	+ 16                        the process, its threads and slab metadata
//	+ ceil(maxMemoryMB / 8)     the hash table, when the cache is full of the
//	                            smallest items (8 bytes per bucket, 1.5 buckets
//	                            per item, ~96-byte items: 12.5%)
//	+ ceil(maxConnections / 64) a 16KiB read buffer per busy connection
//
// The real-memcached tests in test/memcached fill a cache with the smallest
// items and open busy connections, and check the process stays below this.
// The CRD's CEL rule on spec.resources.limits.memory spells the same
// formula; a unit test keeps them equal.
func MinimumMemoryMiB(maxMemoryMB, maxConnections int32) int64 {
	m, c := int64(maxMemoryMB), int64(maxConnections)
	return m + 16 + (m+7)/8 + (c+63)/64
}
