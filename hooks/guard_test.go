package hooks

import "testing"

func TestUnshared(t *testing.T) {
	for in, want := range map[string]string{
		"#": "#", "$share/g/#": "#", "$share/g/presence/users/+": "presence/users/+",
		"$share/g": "$share/g", "$SYS/x": "$SYS/x", "a/b": "a/b",
	} {
		if got := unshared(in); got != want {
			t.Errorf("unshared(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEverything(t *testing.T) {
	for f, want := range map[string]bool{
		"#": true, "+/#": true, "+/+/#": true, "+/+/+/+/#": true,
		"+": false, "+/+": false, "a/#": false, "+/a/#": false, "presence/users/+": false, "#/a": false, "": false,
	} {
		if got := everything(f); got != want {
			t.Errorf("everything(%q) = %v, want %v", f, got, want)
		}
	}
}
