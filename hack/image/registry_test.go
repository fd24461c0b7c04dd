package image

import "testing"

// Plain HTTP is for this machine and private addresses only; a name that
// merely looks local could resolve anywhere.
func TestPlainHTTP(t *testing.T) {
	for registry, want := range map[string]bool{
		"localhost:5000":       true,
		"127.0.0.1:5000":       true,
		"[::1]:5000":           true,
		"10.203.255.1:33117":   true,
		"192.168.1.20":         true,
		"172.16.0.9:5000":      true,
		"[fd00::1]:5000":       true,
		"172.32.0.9:5000":      false,
		"8.8.8.8:5000":         false,
		"registry.local:5000":  false,
		"ghcr.io":              false,
		"registry.example.com": false,
	} {
		if got := PlainHTTP(registry); got != want {
			t.Errorf("PlainHTTP(%q) = %v, want %v", registry, got, want)
		}
	}
}
