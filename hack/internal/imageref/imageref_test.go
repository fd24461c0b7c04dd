package imageref

import "testing"

func TestSplitTag(t *testing.T) {
	for _, c := range []struct{ in, repo, tag string }{
		{"registry.example.com/memcached-operator:v0.1.0", "registry.example.com/memcached-operator", "v0.1.0"},
		{"localhost:5000/memcached-operator:v0.2.0", "localhost:5000/memcached-operator", "v0.2.0"},
		{"localhost:5000/memcached-operator", "localhost:5000/memcached-operator", ""},
		{"memcached", "memcached", ""},
	} {
		repo, tag, ok := SplitTag(c.in)
		if repo != c.repo || tag != c.tag || ok != (c.tag != "") {
			t.Errorf("SplitTag(%q) = %q, %q, %v", c.in, repo, tag, ok)
		}
	}
}
