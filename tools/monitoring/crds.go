// Package monitoring only pins prometheus-operator's API module for the
// CRD generation in scripts/build-tools.sh.
package monitoring

import _ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
