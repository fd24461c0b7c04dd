package olm

import (
	"sort"
	"strings"
	"unicode"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The x-descriptors OLM consoles render fields with.
const (
	xPodCount       = "urn:alm:descriptor:com.tectonic.ui:podCount"
	xNumber         = "urn:alm:descriptor:com.tectonic.ui:number"
	xBoolean        = "urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	xText           = "urn:alm:descriptor:com.tectonic.ui:text"
	xAdvanced       = "urn:alm:descriptor:com.tectonic.ui:advanced"
	xResources      = "urn:alm:descriptor:com.tectonic.ui:resourceRequirements"
	xPullPolicy     = "urn:alm:descriptor:com.tectonic.ui:imagePullPolicy"
	xNodeAffinity   = "urn:alm:descriptor:com.tectonic.ui:nodeAffinity"
	xPodAffinity    = "urn:alm:descriptor:com.tectonic.ui:podAffinity"
	xPodAntiAff     = "urn:alm:descriptor:com.tectonic.ui:podAntiAffinity"
	xConditions     = "urn:alm:descriptor:io.kubernetes.conditions"
	xServiceAccount = "urn:alm:descriptor:io.kubernetes:ServiceAccount"
	xSelect         = "urn:alm:descriptor:com.tectonic.ui:select:"
)

// Fields that are Kubernetes types of their own are described as a whole;
// the operator's own objects are described field by field.
var wholeFields = map[string][]string{
	"resources":                     {xResources},
	"monitoring.exporter.resources": {xResources},
	"affinity.nodeAffinity":         {xNodeAffinity},
	"affinity.podAffinity":          {xPodAffinity},
	"affinity.podAntiAffinity":      {xPodAntiAff},
	"imagePullPolicy":               {xPullPolicy},
	"serviceAccountName":            {xServiceAccount},
	"size":                          {xPodCount},
	"nodeSelector":                  {xAdvanced},
	"tolerations":                   {xAdvanced},
	"imagePullSecrets":              {xAdvanced},
	"podMetadata.labels":            {xAdvanced},
	"podMetadata.annotations":       {xAdvanced},
	"highAvailability.topologySpreadConstraints": {xAdvanced},
	"memcached.extraArgs":                        {xAdvanced},
}

var statusFields = map[string][]string{
	"conditions":    {xConditions},
	"replicas":      {xPodCount},
	"readyReplicas": {xPodCount},
}

// descriptors describes every field of the CRD's spec and status, from
// its OpenAPI schema (the descriptions come from the API's Go comments).
func descriptors(crd *apiextensionsv1.CustomResourceDefinition) ([]operatorsv1alpha1.SpecDescriptor, []operatorsv1alpha1.StatusDescriptor) {
	schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	var spec []operatorsv1alpha1.SpecDescriptor
	walk("", schema.Properties["spec"], func(path string, p apiextensionsv1.JSONSchemaProps) {
		spec = append(spec, operatorsv1alpha1.SpecDescriptor{
			Path: path, DisplayName: displayName(path), Description: firstSentence(p.Description), XDescriptors: specXDescriptors(path, p),
		})
	}, true)
	var status []operatorsv1alpha1.StatusDescriptor
	walk("", schema.Properties["status"], func(path string, p apiextensionsv1.JSONSchemaProps) {
		x := statusFields[path]
		if x == nil {
			x = []string{xText}
		}
		status = append(status, operatorsv1alpha1.StatusDescriptor{
			Path: path, DisplayName: displayName(path), Description: firstSentence(p.Description), XDescriptors: x,
		})
	}, false)
	return spec, status
}

// walk calls leaf for every field under p, in order of path.
func walk(prefix string, p apiextensionsv1.JSONSchemaProps, leaf func(string, apiextensionsv1.JSONSchemaProps), descend bool) {
	names := make([]string, 0, len(p.Properties))
	for name := range p.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		child := p.Properties[name]
		path := strings.TrimPrefix(prefix+"."+name, ".")
		if _, whole := wholeFields[path]; !whole && descend && child.Type == "object" && len(child.Properties) > 0 {
			walk(path, child, leaf, descend)
			continue
		}
		leaf(path, child)
	}
}

func specXDescriptors(path string, p apiextensionsv1.JSONSchemaProps) []string {
	if x, ok := wholeFields[path]; ok {
		return x
	}
	switch {
	case len(p.Enum) > 0:
		var x []string
		for _, e := range p.Enum {
			x = append(x, xSelect+strings.Trim(string(e.Raw), `"`))
		}
		return x
	case p.Type == "boolean":
		return []string{xBoolean}
	case p.Type == "integer" || p.Type == "number":
		return []string{xNumber}
	default:
		return []string{xText}
	}
}

// displayName turns a field path into words: memcached.maxMemoryMB is
// "Max Memory MB".
func displayName(path string) string {
	name := path[strings.LastIndex(path, ".")+1:]
	var words []string
	var word []rune
	runes := []rune(name)
	for i, r := range runes {
		upper := unicode.IsUpper(r)
		nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
		if i > 0 && upper && (unicode.IsLower(runes[i-1]) || nextLower) {
			words = append(words, string(word))
			word = nil
		}
		word = append(word, r)
	}
	words = append(words, string(word))
	for i, w := range words {
		words[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return strings.Join(words, " ")
}

// firstSentence is the start of a field's description: a console shows
// it as a hint.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}
