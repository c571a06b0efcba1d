package configs

import (
	"testing"
	"time"
)

// admin.unready_after: 30s by default; an explicit 0s stays 0 (not ready at
// once); negative and over 24h are refused, naming the key. log.sessions is
// off by default and set from the file or the environment.
func TestMonitoringKeys(t *testing.T) {
	t.Parallel()
	if d := Defaults(); d.Admin.UnreadyAfter == nil || d.Admin.UnreadyAfter.D() != 30*time.Second || d.Log.Sessions {
		t.Fatalf("defaults: unready_after %v, log.sessions %v", d.Admin.UnreadyAfter, d.Log.Sessions)
	}
	c, err := Load(nil, []string{"PRESENCED_ADMIN_UNREADY_AFTER=0s", "PRESENCED_LOG_SESSIONS=true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.UnreadyAfter == nil || *c.Admin.UnreadyAfter != 0 || !c.Log.Sessions {
		t.Fatalf("from the environment: unready_after %v, log.sessions %v", c.Admin.UnreadyAfter, c.Log.Sessions)
	}
	for _, d := range []Duration{-1, Duration(25 * time.Hour)} {
		bad := Defaults()
		bad.Admin.UnreadyAfter = ptr(d)
		mustContain(t, bad.Validate(), ErrInvalid, "admin.unready_after")
	}
	ok := Defaults()
	ok.Admin.UnreadyAfter = ptr(Duration(24 * time.Hour))
	if err := ok.Validate(); err != nil {
		t.Fatalf("24h: %v", err)
	}
}
