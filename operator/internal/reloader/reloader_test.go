package reloader

import (
	"strings"
	"testing"
)

func TestReadsAuthFile(t *testing.T) {
	const file = "/etc/memcached/auth/auth-file"
	for _, c := range []struct {
		name string
		args []string
		want bool
	}{
		{"the operator's -Y FILE", []string{"memcached", "-p", "11211", "-Y", file, "-B", "ascii"}, true},
		{"-YFILE", []string{"memcached", "-Y" + file}, true},
		{"--auth-file FILE", []string{"memcached", "--auth-file", file}, true},
		{"--auth-file=FILE", []string{"memcached", "--auth-file=" + file}, true},
		{"another memcached's file", []string{"memcached", "-Y", "/tmp/other/auth-file"}, false},
		{"no password file", []string{"memcached", "-p", "11211"}, false},
		{"-Y last, without a value", []string{"memcached", "-Y"}, false},
		{"the file as another flag's value", []string{"memcached", "-o", file}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmdline := []byte(strings.Join(c.args, "\x00") + "\x00")
			if got := readsAuthFile(cmdline, file); got != c.want {
				t.Errorf("readsAuthFile(%q) = %v, want %v", c.args, got, c.want)
			}
		})
	}
}
