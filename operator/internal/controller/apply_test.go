package controller

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestSubset(t *testing.T) {
	tests := []struct {
		name       string
		want, have string
		subset     bool
	}{
		{"equal", `{"a":1}`, `{"a":1}`, true},
		{"extra fields in live are someone else's", `{"a":1}`, `{"a":1,"b":2}`, true},
		{"changed scalar", `{"a":1}`, `{"a":2}`, false},
		{"missing field", `{"a":1,"b":2}`, `{"a":1}`, false},
		{"nested maps", `{"spec":{"x":{"y":"z"}}}`, `{"spec":{"x":{"y":"z","w":1}}}`, true},
		{"list elements are compared as subsets", `{"c":[{"name":"m","image":"i"}]}`, `{"c":[{"name":"m","image":"i","imagePullPolicy":"IfNotPresent"}]}`, true},
		{"list length differs", `{"c":[{"name":"m"}]}`, `{"c":[{"name":"m"},{"name":"exporter"}]}`, false},
		{"list order differs", `{"c":["a","b"]}`, `{"c":["b","a"]}`, false},
		{"integer and float are not equal", `{"a":1}`, `{"a":1.5}`, false},
		{"type change", `{"a":"1"}`, `{"a":1}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w, err := toJSONValue(rawJSON(tt.want))
			g.Expect(err).NotTo(HaveOccurred())
			h, err := toJSONValue(rawJSON(tt.have))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(subset(w, h)).To(Equal(tt.subset))
		})
	}
}

// rawJSON marshals as itself.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
