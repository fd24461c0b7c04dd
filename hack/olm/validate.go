package olm

import (
	"fmt"

	apimanifests "github.com/operator-framework/api/pkg/manifests"
	apivalidation "github.com/operator-framework/api/pkg/validation"
	apierrors "github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

// Validators are those `operator-sdk bundle validate --select-optional
// suite=operatorframework` runs: the default bundle validators, then
// OperatorHub's metadata rules (v2), good practices, APIs removed in the
// Kubernetes versions the bundle supports, and the standard capability
// and category names.
var Validators = append(append(interfaces.Validators{}, apivalidation.DefaultBundleValidators...),
	apivalidation.OperatorHubV2Validator,
	apivalidation.GoodPracticesValidator,
	apivalidation.AlphaDeprecatedAPIsValidator,
	apivalidation.StandardCapabilitiesValidator,
	apivalidation.StandardCategoriesValidator,
)

// Findings are a validation's errors and warnings, each naming its source.
type Findings struct{ Errors, Warnings []string }

// Validate loads the bundle in dir as OLM does and runs Validators on it.
// k8sVersion is the newest Kubernetes release the bundle must run on, for
// the removed-APIs check.
func Validate(dir, k8sVersion string) (Findings, error) {
	bundle, err := apimanifests.GetBundleFromDir(dir)
	if err != nil {
		return Findings{}, fmt.Errorf("load the bundle in %s: %w", dir, err)
	}
	objs := bundle.ObjectsToValidate()
	for _, o := range bundle.Objects {
		objs = append(objs, o)
	}
	objs = append(objs, map[string]string{"k8s-version": k8sVersion})
	var f Findings
	for _, result := range Validators.Validate(objs...) {
		for _, e := range result.Errors {
			f.Errors = append(f.Errors, describe(result, e))
		}
		for _, w := range result.Warnings {
			f.Warnings = append(f.Warnings, describe(result, w))
		}
	}
	return f, nil
}

func describe(r apierrors.ManifestResult, e apierrors.Error) string {
	return fmt.Sprintf("%s %s: %s", r.Name, e.Type, e.Error())
}
