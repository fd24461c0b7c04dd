// Package certmanager only pins cert-manager's API module for the CRD
// generation in scripts/build-tools.sh.
package certmanager

import _ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
