// Package names holds the names deploy/ gives what it installs, for every
// test that looks for them: a rename in deploy/ is one edit here.
package names

const (
	// OperatorNamespace is where the manager runs.
	OperatorNamespace = "memcached-operator-system"
	// ManagerServiceAccount is the manager's identity, bound to ManagerRole.
	ManagerServiceAccount = "memcached-operator-controller-manager"
	// ManagerDeployment runs the manager.
	ManagerDeployment = "memcached-operator-controller-manager"
	// ManagerRole is the ClusterRole controller-gen writes from the RBAC
	// markers (deploy/rbac/role.yaml).
	ManagerRole = "memcached-operator-manager-role"
	// CacheNamespace holds the environments' Memcacheds.
	CacheNamespace = "cache"
)
