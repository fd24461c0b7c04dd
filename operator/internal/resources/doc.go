// Package resources turns a Memcached into the objects that run it: a
// Deployment, a headless Service and, when wanted, a PodDisruptionBudget.
//
// Every function here is pure: a Memcached and the operator's defaults go in,
// server-side apply configurations come out. Nothing reads the cluster, so the
// whole desired state is table-tested without an apiserver, and the reconciler
// is left with reading, applying and reporting status.
//
// Each builder sets the same labels and a controller owner reference, and
// returns nil when its object is not wanted (the caller then deletes it).
package resources
