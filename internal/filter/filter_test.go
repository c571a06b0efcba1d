package filter

import "testing"

func TestUnshared(t *testing.T) {
	for in, want := range map[string]string{
		"#": "#", "$share/g/#": "#", "$share/g/presence/users/+": "presence/users/+",
		"$share/g": "$share/g", "$SYS/x": "$SYS/x", "a/b": "a/b",
		// mochi takes the first level as shared in any case (EqualFold).
		"$SHARE/g/#": "#", "$Share/g/+/+": "+/+", "$sHaRe/g/a/b": "a/b", "$SHARE/g": "$SHARE/g",
		"$shared/g/#": "$shared/g/#", "x/$share/g/#": "x/$share/g/#",
	} {
		if got := Unshared(in); got != want {
			t.Errorf("Unshared(%q) = %q, want %q", in, got, want)
		}
	}
}
