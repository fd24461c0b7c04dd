// Package flux only pins helm-controller's API module, from which
// scripts/build-tools.sh generates the HelmRelease CRD with controller-gen
// (helm-controller itself is not served by the Go module proxy, so its
// released CRD cannot be copied as the other controllers' are).
package flux

import _ "github.com/fluxcd/helm-controller/api/v2"
