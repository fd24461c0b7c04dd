package reloader

import (
	"testing"
)

func TestTakesFile(t *testing.T) {
	const auth, memory = "/etc/memcached/auth/auth-file", "/var/lib/memcached/memory"
	for _, c := range []struct {
		name        string
		args        []string
		short, long string
		file        string
		want        bool
	}{
		{"the operator's -Y FILE", []string{"memcached", "-p", "11211", "-Y", auth, "-B", "ascii"}, "-Y", "--auth-file", auth, true},
		{"-YFILE", []string{"memcached", "-Y" + auth}, "-Y", "--auth-file", auth, true},
		{"--auth-file FILE", []string{"memcached", "--auth-file", auth}, "-Y", "--auth-file", auth, true},
		{"--auth-file=FILE", []string{"memcached", "--auth-file=" + auth}, "-Y", "--auth-file", auth, true},
		{"another memcached's file", []string{"memcached", "-Y", "/tmp/other/auth-file"}, "-Y", "--auth-file", auth, false},
		{"no password file", []string{"memcached", "-p", "11211"}, "-Y", "--auth-file", auth, false},
		{"-Y last, without a value", []string{"memcached", "-Y"}, "-Y", "--auth-file", auth, false},
		{"the file as another flag's value", []string{"memcached", "-o", auth}, "-Y", "--auth-file", auth, false},
		{"the operator's -e FILE", []string{"memcached", "-m", "64", "-e", memory}, "-e", "--memory-file", memory, true},
		{"--memory-file=FILE", []string{"memcached", "--memory-file=" + memory}, "-e", "--memory-file", memory, true},
		{"a password file is no memory file", []string{"memcached", "-Y", memory}, "-e", "--memory-file", memory, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := takesFile(c.args, c.file, c.short, c.long); got != c.want {
				t.Errorf("takesFile(%q, %s, %s) = %v, want %v", c.args, c.file, c.short, got, c.want)
			}
		})
	}
}
