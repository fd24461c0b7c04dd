package resources

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/operator/api/v1alpha1"
)

// Where the pods mount the Secrets of spec.security. The reloader reads
// the same paths, so they are part of the pod's contract, not a detail.
const (
	TLSMountPath  = "/etc/memcached/tls"
	AuthMountPath = "/etc/memcached/auth"

	tlsVolume         = "tls"
	authVolume        = "auth"
	reloaderContainer = "reloader"
	plainPortName     = "memcached-plain"
)

// tlsSpec and authSpec return the parts of spec.security that are set.
func tlsSpec(m *cachev1alpha1.Memcached) *cachev1alpha1.TLSSpec {
	if m.Spec.Security == nil {
		return nil
	}
	return m.Spec.Security.TLS
}

func authSpec(m *cachev1alpha1.Memcached) *cachev1alpha1.AuthSpec {
	if m.Spec.Security == nil {
		return nil
	}
	return m.Spec.Security.Auth
}

// verifyModes maps spec.security.tls.clientCertificates to memcached's
// ssl_verify_mode. Mode 3 (Once) is left out: it only matters for
// renegotiation, which TLS 1.3 does not have.
var verifyModes = map[cachev1alpha1.ClientCertificateMode]string{
	cachev1alpha1.ClientCertificatesNone:    "0",
	cachev1alpha1.ClientCertificatesRequest: "1",
	cachev1alpha1.ClientCertificatesRequire: "2",
}

// minVersions maps spec.security.tls.minVersion to ssl_min_version, which
// memcached 1.6 takes as a number (0 is TLS 1.0) and refuses as "tlsv1.2".
var minVersions = map[cachev1alpha1.TLSVersion]string{
	cachev1alpha1.TLSVersion12: "2",
	cachev1alpha1.TLSVersion13: "3",
}

// ClientCertificates returns spec.security.tls.clientCertificates or its default.
func ClientCertificates(t *cachev1alpha1.TLSSpec) cachev1alpha1.ClientCertificateMode {
	if t.ClientCertificates == "" {
		return cachev1alpha1.ClientCertificatesNone
	}
	return t.ClientCertificates
}

// securityArgs are the memcached flags spec.security asks for.
//
// With TLS, -Z makes every listener TLS unless it is listed as notls, so
// the listeners are spelled out: the TLS port on all addresses ("*" is
// memcached's wildcard for IPv4 and IPv6 alike, as without -l), a
// plaintext listener on the pod's loopback for the exporter and the
// reloader, and the migration port when asked for.
//
// A secured cache also refuses what would hand its keys to anyone who
// connects: stats cachedump and lru_crawler metadump (-X), watch (-W) and,
// unless allowed, flush_all (-F). shutdown stays off, as memcached's
// default: a client could otherwise stop a pod and make it restart empty.
func securityArgs(m *cachev1alpha1.Memcached) []string {
	if m.Spec.Security == nil {
		return nil
	}
	var args []string
	if t := tlsSpec(m); t != nil {
		mode := ClientCertificates(t)
		opts := []string{
			"ssl_chain_cert=" + TLSMountPath + "/" + cachev1alpha1.TLSCertKey,
			"ssl_key=" + TLSMountPath + "/" + cachev1alpha1.TLSKeyKey,
		}
		if mode != cachev1alpha1.ClientCertificatesNone {
			opts = append(opts, "ssl_ca_cert="+TLSMountPath+"/"+cachev1alpha1.TLSCAKey)
		}
		minVersion := t.MinVersion
		if minVersion == "" {
			minVersion = cachev1alpha1.TLSVersion12
		}
		opts = append(opts, "ssl_verify_mode="+verifyModes[mode], "ssl_min_version="+minVersions[minVersion])
		listeners := []string{
			"*:" + strconv.Itoa(cachev1alpha1.MemcachedPort),
			"notls:127.0.0.1:" + strconv.Itoa(cachev1alpha1.LoopbackPort),
		}
		if t.PlaintextPort != nil {
			listeners = append(listeners, "notls:*:"+strconv.Itoa(int(*t.PlaintextPort)))
		}
		args = append(args, "-Z", "-o", strings.Join(opts, ","), "-l", strings.Join(listeners, ","))
	}
	if authSpec(m) != nil {
		// memcached refuses ASCII authentication unless the binary protocol
		// is off.
		args = append(args, "-Y", AuthMountPath+"/"+cachev1alpha1.AuthFileKey, "-B", "ascii")
	}
	args = append(args, "-X", "-W")
	if !m.Spec.Security.AllowFlushAll {
		args = append(args, "-F")
	}
	return args
}

// securityVolumes mount the Secrets read-only into memcached and the
// reloader. The kubelet updates a Secret volume in place (an atomic swap of
// its ..data link) when the Secret changes, which is what lets the reloader
// load a new certificate without a restart. A subPath mount would never be
// updated, so each Secret is mounted whole.
func securityVolumes(m *cachev1alpha1.Memcached) ([]*corev1ac.VolumeApplyConfiguration, []*corev1ac.VolumeMountApplyConfiguration) {
	// 0440 with the pod's fsGroup: only the pod's user reads the private
	// key. When the platform picks the uid, it picks the fsGroup too
	// (OpenShift's restricted SCCs); without one the files must be
	// world-readable inside the pod to be readable at all.
	mode := int32(0o440)
	if userIDPolicy(m) == cachev1alpha1.UserIDPlatform {
		mode = 0o444
	}
	var volumes []*corev1ac.VolumeApplyConfiguration
	var mounts []*corev1ac.VolumeMountApplyConfiguration
	if t := tlsSpec(m); t != nil {
		volumes = append(volumes, corev1ac.Volume().WithName(tlsVolume).
			WithSecret(corev1ac.SecretVolumeSource().WithSecretName(t.SecretName).WithDefaultMode(mode)))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(tlsVolume).WithMountPath(TLSMountPath).WithReadOnly(true))
	}
	if a := authSpec(m); a != nil {
		volumes = append(volumes, corev1ac.Volume().WithName(authVolume).
			WithSecret(corev1ac.SecretVolumeSource().WithSecretName(a.SecretName).WithDefaultMode(mode).
				WithItems(corev1ac.KeyToPath().WithKey(cachev1alpha1.AuthFileKey).WithPath(cachev1alpha1.AuthFileKey))))
		mounts = append(mounts, corev1ac.VolumeMount().WithName(authVolume).WithMountPath(AuthMountPath).WithReadOnly(true))
	}
	return volumes, mounts
}

// ReloaderCommand is the reloader's binary in the operator's image, beside
// the manager (its entrypoint).
const ReloaderCommand = "/reloader"

// ReloaderArgs are the reloader's arguments. With auth and the exporter,
// the reloader also listens on the pod's loopback for the exporter and
// authenticates its connections; with warm restart it makes memcached save
// its memory file when the pod stops.
func ReloaderArgs(m *cachev1alpha1.Memcached) []string {
	var args []string
	address := "127.0.0.1:" + strconv.Itoa(cachev1alpha1.MemcachedPort)
	if tlsSpec(m) != nil {
		args = append(args, "--tls-dir="+TLSMountPath)
		address = "127.0.0.1:" + strconv.Itoa(cachev1alpha1.LoopbackPort)
	}
	if authSpec(m) != nil {
		args = append(args, "--auth-file="+AuthMountPath+"/"+cachev1alpha1.AuthFileKey)
		if exporterSpec(m) != nil {
			args = append(args, "--exporter-listen-address=127.0.0.1:"+strconv.Itoa(cachev1alpha1.ExporterAuthPort))
		}
	}
	if m.WarmRestart() != nil {
		args = append(args, "--memory-file="+MemoryFile, "--drain="+strconv.Itoa(int(m.DrainSeconds()))+"s")
	}
	return append(args, "--memcached-address="+address)
}

// reloaderContainerSpec is the sidecar that makes memcached load a rotated
// certificate (refresh_certs) or password file (SIGHUP) in place, so that
// a rotation keeps every key, and, with warm restart, save its items
// (SIGUSR1) when the pod stops. It runs the operator's own image, so its
// version always matches the operator that wrote the pod.
func reloaderContainerSpec(m *cachev1alpha1.Memcached, opts Options, mounts []*corev1ac.VolumeMountApplyConfiguration) *corev1ac.ContainerApplyConfiguration {
	if m.Spec.Security == nil && m.WarmRestart() == nil {
		return nil
	}
	return corev1ac.Container().
		WithName(reloaderContainer).
		WithImage(opts.ReloaderImage).
		WithCommand(ReloaderCommand).
		WithArgs(ReloaderArgs(m)...).
		WithVolumeMounts(mounts...).
		// It holds two small files and one connection; the soft limit
		// keeps the Go runtime well inside the container's limit.
		WithEnv(corev1ac.EnvVar().WithName("GOMEMLIMIT").WithValue("24MiB")).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("5m"),
				corev1.ResourceMemory: resource.MustParse("16Mi"),
			}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")})).
		WithSecurityContext(restrictedContainerSecurityContext())
}
